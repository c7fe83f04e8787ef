"""The Tornado application: routes only.

Each route names a handler and hands it the shared ``AppContext`` through ``initialize``.
Path parameters are named groups: ``bucket`` never holds a slash, ``key`` is the whole
percent-decoded rest of the path after ``/objects/``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import tornado.routing
import tornado.web
from tornado.httputil import HTTPMessageDelegate, HTTPServerRequest

from service.common.wire import API_PREFIX
from service.context import AppContext
from service.http.audit_handlers import AuditHandler, AuditVerifyHandler
from service.http.base import ApiHandler, Home, NotFoundHandler
from service.http.batch_handlers import BatchHandler
from service.http.bucket_handlers import (
    BucketHandler,
    BucketsHandler,
    ObjectListHandler,
    VersionListHandler,
)
from service.http.console import ConsoleFileHandler, ConsoleRedirectHandler
from service.http.event_handlers import BucketEventsHandler
from service.http.fleet_handlers import (
    ClaimHandler,
    CompleteHandler,
    FailHandler,
    HeartbeatHandler,
    OutputsHandler,
    WorkersHandler,
)
from service.http.h1_exchange import H1Exchange
from service.http.health import HealthHandler
from service.http.identity import (
    AccessKeyHandler,
    AccessKeysHandler,
    LoginHandler,
    PresignHandler,
    UserHandler,
    UsersHandler,
)
from service.http.image_handlers import ImageHandler, ImageOptimizeHandler
from service.http.lifecycle_handlers import BucketLifecycleHandler, LifecycleRunHandler
from service.http.lock_handlers import LegalHoldHandler, RetentionHandler
from service.http.multipart_handlers import (
    MultipartCompleteHandler,
    MultipartInitHandler,
    MultipartListHandler,
    MultipartPartHandler,
    MultipartSessionHandler,
)
from service.http.notification_handlers import BucketNotificationsHandler
from service.http.object_handlers import ObjectHandler
from service.http.object_reads import ObjectReadRouter, direct_reads, resolve_object_read
from service.http.object_writes import SmallPut, takes_small_put
from service.http.openapi_handlers import DocsHandler, OpenApiHandler
from service.http.preflight import ROUTE as PREFLIGHT_ROUTE
from service.http.preflight import PreflightRouter
from service.http.replication_feed_handlers import (
    BulkPayloadFeedHandler,
    ConfirmFeedHandler,
    PayloadFeedHandler,
    RecordsFeedHandler,
    SecretFeedHandler,
    SnapshotFeedHandler,
)
from service.http.replication_handlers import PromoteHandler, ReplicationHandler
from service.http.scrub_handlers import ScrubHandler
from service.http.system import MetricsHandler, SystemInfoHandler, SystemPerformanceHandler
from service.http.videos import (
    PLAY_ROUTE,
    JobHandler,
    JobsHandler,
    PlayOtherMethodsHandler,
    ShareHandler,
    SharesHandler,
    ThumbnailHandler,
    resolve_playback_read,
)
from service.procs.forward import forwarded_route

BUCKET = r"(?P<bucket>[^/]+)"
KEY = r"(?P<key>.*)"
UPLOAD = r"(?P<upload_id>[^/]+)"
API = API_PREFIX
OBJECT = rf"{API}/buckets/{BUCKET}/objects/{KEY}"
RETENTION = rf"{API}/buckets/{BUCKET}/objects/(?P<key>.+)/retention"
LEGAL_HOLD = rf"{API}/buckets/{BUCKET}/objects/(?P<key>.+)/legal-hold"
OBJECT_READ = rf"{API}/buckets/{BUCKET}/objects/(?P<key>(?!.*/(?:retention|legal-hold)$).*)"
"""The object path but for its lock routes (matched on the raw path: ``%2F`` is no ``/``)."""
PLAY = rf"{API}/videos/play/(?P<token>[^/]+)/(?P<path>.*)"


def handler_table() -> list[tuple[str, type[ApiHandler]]]:
    """Every route pattern and its handler, in matching order."""
    return [
        (r"/health", HealthHandler),
        (rf"{API}/buckets", BucketsHandler),
        (rf"{API}/buckets/{BUCKET}", BucketHandler),
        (rf"{API}/buckets/{BUCKET}/objects", ObjectListHandler),
        (RETENTION, RetentionHandler),
        (LEGAL_HOLD, LegalHoldHandler),
        (OBJECT, ObjectHandler),
        (rf"{API}/buckets/{BUCKET}/versions", VersionListHandler),
        (rf"{API}/buckets/{BUCKET}/batch", BatchHandler),
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
        (rf"{API}/videos/jobs/(?P<job_id>[^/]+)/claim", ClaimHandler),
        (rf"{API}/videos/jobs/(?P<job_id>[^/]+)/heartbeat", HeartbeatHandler),
        (rf"{API}/videos/jobs/(?P<job_id>[^/]+)/complete", CompleteHandler),
        (rf"{API}/videos/jobs/(?P<job_id>[^/]+)/fail", FailHandler),
        (rf"{API}/videos/jobs/(?P<job_id>[^/]+)/outputs", OutputsHandler),
        (rf"{API}/videos/workers", WorkersHandler),
        (rf"{API}/videos/shares", SharesHandler),
        (rf"{API}/videos/shares/(?P<share_id>[^/]+)", ShareHandler),
        (PLAY, PlayOtherMethodsHandler),
        (rf"{API}/buckets/{BUCKET}/lifecycle", BucketLifecycleHandler),
        (rf"{API}/system/lifecycle/run", LifecycleRunHandler),
        (rf"{API}/buckets/{BUCKET}/events", BucketEventsHandler),
        (rf"{API}/buckets/{BUCKET}/notifications", BucketNotificationsHandler),
        (rf"{API}/system/scrub", ScrubHandler),
        (rf"{API}/replication", ReplicationHandler),
        (rf"{API}/replication/promote", PromoteHandler),
        (rf"{API}/replication/snapshot", SnapshotFeedHandler),
        (rf"{API}/replication/secret", SecretFeedHandler),
        (rf"{API}/replication/records", RecordsFeedHandler),
        (rf"{API}/replication/payloads", BulkPayloadFeedHandler),
        (rf"{API}/replication/confirm", ConfirmFeedHandler),
        (rf"{API}/replication/payloads/(?P<payload_id>[^/]+)", PayloadFeedHandler),
        (rf"{API}/system/audit", AuditHandler),
        (rf"{API}/system/audit/verify", AuditVerifyHandler),
        (r"/", ConsoleRedirectHandler),
        (r"/console", ConsoleRedirectHandler),
        (r"/console/(?P<path>.*)", ConsoleFileHandler),
        (rf"{API}/openapi\.json", OpenApiHandler),
        (rf"{API}/docs", DocsHandler),
    ]


def routes_at(home: Home) -> list[tuple[str, type[ApiHandler]]]:
    """The routes whose answer lives at ``home`` (``ApiHandler.home``): those a worker
    forwards to the writer are ``routes_at(Home.JOURNAL)``."""
    return [(pattern, handler) for pattern, handler in handler_table() if handler.home is home]


def route_names() -> list[str]:
    """The route templates used as metric labels (a worker's forwarded ones included)."""
    return [
        *(handler.route_name for _, handler in handler_table()),
        *(forwarded_route(handler.route_name) for _, handler in routes_at(Home.JOURNAL)),
        NotFoundHandler.route_name,
        PREFLIGHT_ROUTE,
    ]


def object_read_router(ctx: AppContext) -> ObjectReadRouter:
    """GET and HEAD of ``OBJECT_READ``: the ``ObjectRead`` router of that route."""
    return ObjectReadRouter(
        ctx,
        ObjectHandler.route_name,
        resolve_object_read,
        {"bucket": "InvalidArgument", "key": "InvalidKey"},
    )


DIRECT_WRITES = frozenset({"PUT", "DELETE"})
"""Object methods the connection hands to ``ObjectHandler`` itself (``direct_object_routes``)."""


def direct_object_routes(
    app: tornado.web.Application, ctx: AppContext, before: Callable[[], None] | None = None
) -> Callable[[H1Exchange], HTTPMessageDelegate | None]:
    """The connection's shortcut to the object route (``object_reads.direct_reads``): GET
    and HEAD to ``ObjectRead``, a small PUT to ``SmallPut`` (``object_writes``), other PUTs
    and DELETE to ``app``'s delegate of ``ObjectHandler``;
    the same answer as through the application's routing, without it. ``OBJECT_READ``
    leaves out the lock routes (which come before ``OBJECT`` in ``handler_table``), so a
    path it matches is routed to ``OBJECT`` by the rule list too."""

    def write_delegate(
        request: HTTPServerRequest, arguments: dict[str, Any]
    ) -> HTTPMessageDelegate:
        if takes_small_put(ctx, request):
            return SmallPut(ctx, request, arguments)
        return app.get_handler_delegate(
            request, ObjectHandler, {"ctx": ctx}, path_args=[], path_kwargs=arguments
        )

    return direct_reads(
        object_read_router(ctx), OBJECT_READ, before, (DIRECT_WRITES, write_delegate)
    )


def read_routes(ctx: AppContext) -> list[tornado.routing.Rule]:
    """GET and HEAD of objects and of shared video outputs, answered without a
    ``RequestHandler`` (``service.http.object_reads``); other methods fall through to the
    handler of the same pattern in ``handler_table``."""
    return [
        tornado.routing.Rule(tornado.routing.PathMatches(OBJECT_READ), object_read_router(ctx)),
        tornado.routing.Rule(
            tornado.routing.PathMatches(PLAY),
            ObjectReadRouter(
                ctx,
                PLAY_ROUTE,
                resolve_playback_read,
                {"token": "InvalidArgument", "path": "InvalidArgument"},
                any_origin=True,
            ),
        ),
    ]


def make_app(ctx: AppContext) -> tornado.web.Application:
    """Build the application for ``ctx``."""
    routes: list[tornado.routing.Rule] = [
        tornado.routing.Rule(tornado.routing.AnyMatches(), PreflightRouter(ctx))
    ]
    routes.extend(read_routes(ctx))
    routes.extend(
        tornado.web.url(pattern, handler, {"ctx": ctx}) for pattern, handler in handler_table()
    )
    return tornado.web.Application(
        routes,
        default_handler_class=NotFoundHandler,
        default_handler_args={"ctx": ctx},
        compress_response=False,
        serve_traceback=False,
        log_function=lambda handler: None,  # our on_finish writes the access log
    )
