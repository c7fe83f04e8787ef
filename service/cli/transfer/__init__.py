"""``cp``/``mirror``/``mv``: moving trees between a local disk and a bucket, or two buckets.

Memory stays bounded for any number of files: both sides are walked as streams in key order
(``walk``: a local directory is listed and sorted one directory at a time, a bucket is listed
a page at a time) and merge-joined by relative key (``plan``); ``pool`` keeps at most a fixed
number of files in flight; ``resume`` remembers the upload id of each unfinished multipart
upload so a re-run continues it; ``progress`` draws files, bytes, rate and ETA on a terminal.
``engine`` ties these together.
"""
