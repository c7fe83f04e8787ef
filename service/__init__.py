"""A single-node object storage server: buckets, streaming objects, journaled metadata."""

__version__ = "0.1.0"
