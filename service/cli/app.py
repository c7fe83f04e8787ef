"""``App``: what every command gets from the group: the output, the aliases and clients.

One ``ServiceClient`` per alias, made on first use and closed when the command ends. The
client's pool is sized for the transfer workers plus their parallel parts.
"""

from __future__ import annotations

import click

from service.cli.config import Alias, AliasStore, config_dir
from service.cli.output import Output
from service.cli.paths import RemotePath
from service.client import BucketClient, ServiceClient

__all__ = ["App", "json_option", "pass_app"]


class App:
    def __init__(self, *, json_mode: bool) -> None:
        self.output = Output(json_mode=json_mode)
        self.aliases = AliasStore()
        self.config_dir = config_dir()
        self.max_connections = 64
        self._clients: dict[str, ServiceClient] = {}

    def client(self, alias_name: str, *, timeout: float | None = 60.0) -> ServiceClient:
        key = f"{alias_name}\0{timeout}"
        if key not in self._clients:
            alias: Alias = self.aliases.get(alias_name)
            self._clients[key] = ServiceClient(
                base_url=alias.url,
                access_key=alias.access_key,
                secret_key=alias.secret_key,
                timeout=timeout,
                max_connections=self.max_connections,
            )
        return self._clients[key]

    def bucket(self, remote: RemotePath) -> BucketClient:
        return self.client(remote.alias).bucket(remote.bucket)

    def close(self) -> None:
        for client in self._clients.values():
            client.close()
        self._clients.clear()


pass_app = click.make_pass_decorator(App)


def _set_json(ctx: click.Context, _: click.Parameter, value: bool) -> None:
    if value:
        app = ctx.find_object(App)
        if app is not None:
            app.output.json = True


#: ``--json`` on every command (also accepted before the command: ``svc --json ls``).
json_option = click.option(
    "--json",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_set_json,
    help="One JSON document per line instead of text.",
)
