"""The one command-line entry point, ``laggard``.

Subcommands live in ``laggard.commands.<name>`` and are imported only when used, so ``laggard --help``
stays fast and a command never pays for another's imports (Faust, River, matplotlib).
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from typing import Any

import click

from laggard.errors import INTERRUPTED
from streams.errors import BrokerUnavailable, CheckpointTooLarge

# name -> (module, attribute, one-line help shown by `laggard --help`)
COMMANDS: dict[str, tuple[str, str, str]] = {
    "demo": ("laggard.commands.demo", "demo", "Run a synthetic cluster in-process and write a report."),
    "run": ("laggard.commands.run", "run", "Run the pipeline in-process on a trace (no broker)."),
    "rank": ("laggard.commands.rank", "rank", "Rank nodes of a task file by P-Cores and show the blacklist."),
    "classify": ("laggard.commands.classify", "classify", "Classify nodes per period and predict weak ones (ML-NA)."),
    "eval": ("laggard.commands.eval", "eval_", "Evaluate straggler prediction methods on a trace."),
    "simulate": ("laggard.commands.simulate", "simulate_", "Measure the job time saved by relaunching flagged tasks."),
    "replay": ("laggard.commands.replay", "replay", "Replay a trace as task events to Kafka or stdout."),
    "worker": ("laggard.commands.worker", "worker", "Run the stream worker on Kafka (Faust or direct engine)."),
    "adapter": ("laggard.commands.adapter", "adapter", "Apply blacklist deltas to a scheduler."),
    "topics": ("laggard.commands.topics", "topics", "Manage laggard's Kafka topics."),
    "kafka": ("laggard.commands.kafka", "kafka", "Run a local Kafka broker (development, tests, CI)."),
    "bench": ("laggard.commands.bench", "bench", "Measure speed and cost beside their floors."),
    "advise": ("laggard.commands.advise", "advise", "Advise schedulers which nodes to avoid for a task (trees)."),
    "scenarios": ("laggard.commands.scenarios", "scenarios", "Score the blacklist on fault scenarios."),
}


class LazyGroup(click.Group):
    """A group whose subcommands are imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return [name for name in COMMANDS if self._available(name)]

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS or not self._available(cmd_name):
            return None
        module_name, attribute, _ = COMMANDS[cmd_name]
        command = getattr(importlib.import_module(module_name), attribute)
        assert isinstance(command, click.Command)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, COMMANDS[name][2]) for name in self.list_commands(ctx)]
        if not rows:
            return
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def invoke(self, ctx: click.Context) -> Any:
        """Ctrl-C anywhere in a command ends it with the shell's 130 (128 + SIGINT) and one line, not click's
        "Aborted!" and 1, which scripts and supervisors cannot tell from a failure. EOF at a prompt stays click's."""
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            click.echo("\ninterrupted", err=True)
            raise click.exceptions.Exit(INTERRUPTED) from None

    @staticmethod
    def _available(name: str) -> bool:
        return importlib.util.find_spec(COMMANDS[name][0]) is not None


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="laggard")
def cli() -> None:
    """laggard finds slow nodes and straggling tasks while jobs run, and tells schedulers which
    nodes to avoid.

    Start with `laggard demo` (no broker needed), then `laggard run --trace FORMAT:PATH`.
    """


def main(argv: list[str] | None = None) -> Any:
    """Console-script entry: user mistakes print one line; anything else is a bug and keeps its traceback."""
    try:
        return cli.main(args=argv, standalone_mode=True)
    except OSError as exc:
        # Raised deep inside a reader for a path the user gave (missing, a directory, not one, unreadable).
        where = f": {exc.filename}" if exc.filename else ""
        click.echo(f"Error: {exc.strerror or exc}{where}", err=True)
        sys.exit(1)
    except (BrokerUnavailable, CheckpointTooLarge) as exc:
        click.echo(f"Error: {exc}", err=True)
        sys.exit(1)


if __name__ == "__main__":
    main()
