"""The ``svc`` command group and ``main``, the one place a failure becomes a line and a code.

Commands raise; ``main`` catches everything and prints one line ``svc: SUBJECT: Cause`` on
stderr (a JSON document on stdout with ``--json``), never a traceback, and exits with the
code of ``errors``. Ctrl-C exits 130 with ``svc: interrupted``; a closed stdout (``| head``)
exits 141 silently. ``SVC_DEBUG=1`` shows the traceback of an unexpected error.
"""

from __future__ import annotations

import os
import sys
import traceback

import click

from service.cli.app import App, json_option
from service.cli.commands import COMMANDS, load
from service.cli.errors import (
    EXIT_BROKEN_PIPE,
    EXIT_ERROR,
    EXIT_INTERRUPTED,
    CliError,
    exit_code_for,
)
from service.cli.output import Output

__all__ = ["cli", "main"]

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


class StdoutClosedError(Exception):
    """stdout's reader went away (``| head``); not an OSError, so click lets it through."""


class SvcGroup(click.Group):
    """The group: its commands are loaded on first use (``service.cli.commands``), and a
    broken pipe becomes ``StdoutClosedError`` before click's own handler would exit 1."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands:
            command = load(cmd_name, json_option)
            if command is None:
                return None
            self.add_command(command)
        return self.commands[cmd_name]

    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except BrokenPipeError as error:
            raise StdoutClosedError() from error


@click.group(cls=SvcGroup, context_settings=CONTEXT)
@click.option("--json", "json_mode", is_flag=True, help="One JSON document per line.")
@click.version_option(package_name="service", prog_name="svc")
@click.pass_context
def cli(ctx: click.Context, json_mode: bool) -> None:
    """svc: the command line for the object store.

    Remote paths are ALIAS/BUCKET/KEY (an alias names a server and a key pair; see
    `svc alias set`, or set SVC_URL=http://ACCESS_KEY:SECRET_KEY@host:port for the alias
    `env`); anything else is a local path.

    \b
    Examples:
      svc alias set local http://127.0.0.1:9000 bk_ID        # asks for the secret key
      svc mb local/photos
      svc cp -r ~/Pictures/ local/photos/2026/
      svc ls -r local/photos
      svc mirror --remove ./site local/www
      svc share get --expire 1h local/photos/cat.jpg
      svc cat local/logs/today.txt | grep ERROR

    \b
    Shell completion: eval "$(_SVC_COMPLETE=bash_source svc)" (or zsh_source, fish_source)
    Exit codes: 0 ok, 1 error, 2 usage, 3 not found, 4 denied, 5 conflict,
    6 unreachable, 7 partly failed, 130 interrupted, 141 stdout closed
    """
    app = App(json_mode=json_mode)
    ctx.obj = app
    ctx.call_on_close(app.close)


def _fail(error: BaseException, json_mode: bool) -> int:
    subject = error.subject if isinstance(error, CliError) else ""
    if isinstance(error, OSError) and not isinstance(error, CliError) and error.filename:
        subject = str(error.filename)
    Output(json_mode=json_mode).failure(subject, error)
    return exit_code_for(error)


def main(argv: list[str] | None = None) -> None:
    """The console script: run ``cli`` and turn every outcome into an exit code."""
    args = sys.argv[1:] if argv is None else argv
    json_mode = "--json" in args
    try:
        result = cli.main(args=args, prog_name="svc", standalone_mode=False)
        code = result if isinstance(result, int) else 0
    except click.exceptions.Exit as done:
        code = done.exit_code
    except (KeyboardInterrupt, click.exceptions.Abort):
        sys.stderr.write("svc: interrupted\n")
        sys.stderr.flush()
        os._exit(EXIT_INTERRUPTED)  # running transfer threads must not hold the exit up
    except click.ClickException as usage:
        hint = " (see svc --help)" if isinstance(usage, click.UsageError) else ""
        sys.stderr.write(f"svc: {usage.format_message()}{hint}\n")
        code = usage.exit_code
    except (BrokenPipeError, StdoutClosedError):
        _silence_stdout()
        code = EXIT_BROKEN_PIPE
    except Exception as error:
        if os.environ.get("SVC_DEBUG"):
            traceback.print_exc()
        try:
            code = _fail(error, json_mode)
        except BrokenPipeError:
            _silence_stdout()
            code = EXIT_BROKEN_PIPE
        if code == 0:
            code = EXIT_ERROR
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        _silence_stdout()
        code = EXIT_BROKEN_PIPE
    sys.exit(code)


def _silence_stdout() -> None:
    """After a broken pipe, point stdout at /dev/null so the final flush cannot fail again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
