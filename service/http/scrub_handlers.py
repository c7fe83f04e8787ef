"""``/api/v1/system/scrub``: the scrub's state and findings (GET), a pass now (POST).

Both are an administrator's (``system:info`` to read, ``system:maintenance`` to start).
"""

from __future__ import annotations

from service.auth import Action
from service.common.api_errors import ApiError
from service.http.base import ApiHandler, Home


class ScrubHandler(ApiHandler):
    route_name = "/api/v1/system/scrub"
    home = Home.JOURNAL
    SUPPORTED_METHODS = ("GET", "POST")

    def refused_on_standby(self) -> bool:
        """A pass re-reads this server's own disk: not a write, so a standby starts one."""
        return False

    def get(self) -> None:
        self.authorize(Action.SYSTEM_INFO)
        self.send_json(200, self.ctx.scrub.document())

    def post(self) -> None:
        self.authorize(Action.SYSTEM_MAINTENANCE)
        if not self.ctx.scrub.start_pass():
            raise ApiError("InvalidState", "a scrub pass is already running")
        self.send_json(202, self.ctx.scrub.document())
