"""The Tornado application: routes only.

Each route names a handler and hands it the shared ``AppContext`` through ``initialize``.
Path parameters are named groups: ``bucket`` never holds a slash, ``key`` is the whole
percent-decoded rest of the path after ``/objects/``.
"""

from __future__ import annotations

import tornado.web

from service.context import AppContext
from service.http.base import ApiHandler, NotFoundHandler
from service.http.buckets import (
    BucketHandler,
    BucketsHandler,
    ObjectListHandler,
    VersionListHandler,
)
from service.http.health import HealthHandler
from service.http.identity import (
    AccessKeyHandler,
    AccessKeysHandler,
    LoginHandler,
    PresignHandler,
    UserHandler,
    UsersHandler,
)
from service.http.images import ImageHandler, ImageOptimizeHandler
from service.http.multipart import (
    MultipartCompleteHandler,
    MultipartInitHandler,
    MultipartListHandler,
    MultipartPartHandler,
    MultipartSessionHandler,
)
from service.http.objects import ObjectHandler
from service.http.system import MetricsHandler, SystemInfoHandler, SystemPerformanceHandler
from service.http.videos import (
    JobHandler,
    JobsHandler,
    PlayHandler,
    ShareHandler,
    SharesHandler,
    ThumbnailHandler,
)

BUCKET = r"(?P<bucket>[^/]+)"
KEY = r"(?P<key>.*)"
UPLOAD = r"(?P<upload_id>[^/]+)"
API = "/api/v1"


def handler_table() -> list[tuple[str, type[ApiHandler]]]:
    """Every route pattern and its handler, in matching order."""
    return [
        (r"/health", HealthHandler),
        (rf"{API}/buckets", BucketsHandler),
        (rf"{API}/buckets/{BUCKET}", BucketHandler),
        (rf"{API}/buckets/{BUCKET}/objects", ObjectListHandler),
        (rf"{API}/buckets/{BUCKET}/objects/{KEY}", ObjectHandler),
        (rf"{API}/buckets/{BUCKET}/versions", VersionListHandler),
        (rf"{API}/buckets/{BUCKET}/images/{KEY}", ImageHandler),
        (rf"{API}/images/optimize", ImageOptimizeHandler),
        (rf"{API}/auth/login", LoginHandler),
        (rf"{API}/users", UsersHandler),
        (rf"{API}/users/(?P<user_id>[^/]+)", UserHandler),
        (rf"{API}/access-keys", AccessKeysHandler),
        (rf"{API}/access-keys/(?P<access_key_id>[^/]+)", AccessKeyHandler),
        (rf"{API}/presign", PresignHandler),
        (rf"{API}/system/info", SystemInfoHandler),
        (rf"{API}/system/performance", SystemPerformanceHandler),
        (rf"{API}/metrics", MetricsHandler),
        (rf"{API}/multipart", MultipartListHandler),
        (rf"{API}/multipart/init", MultipartInitHandler),
        (rf"{API}/multipart/{UPLOAD}", MultipartSessionHandler),
        (rf"{API}/multipart/{UPLOAD}/part", MultipartPartHandler),
        (rf"{API}/multipart/{UPLOAD}/complete", MultipartCompleteHandler),
        (rf"{API}/videos/thumbnails", ThumbnailHandler),
        (rf"{API}/videos/jobs", JobsHandler),
        (rf"{API}/videos/jobs/(?P<job_id>[^/]+)", JobHandler),
        (rf"{API}/videos/shares", SharesHandler),
        (rf"{API}/videos/shares/(?P<share_id>[^/]+)", ShareHandler),
        (rf"{API}/videos/play/(?P<token>[^/]+)/(?P<path>.*)", PlayHandler),
    ]


def route_names() -> list[str]:
    """The route templates used as metric labels."""
    return [handler.route_name for _, handler in handler_table()] + [NotFoundHandler.route_name]


def make_app(ctx: AppContext) -> tornado.web.Application:
    """Build the application for ``ctx``."""
    routes = [
        tornado.web.url(pattern, handler, {"ctx": ctx}) for pattern, handler in handler_table()
    ]
    return tornado.web.Application(
        routes,
        default_handler_class=NotFoundHandler,
        default_handler_args={"ctx": ctx},
        compress_response=False,
        serve_traceback=False,
        log_function=lambda handler: None,  # our on_finish writes the access log
    )
