"""Docs that cannot drift: the CLI reference is generated from the CLI, every setting is listed.

Regenerate docs/cli.md after changing a command: ``.venv/bin/python -m tests.test_docs``.
"""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from graphmem import Settings
from resolvers.commands import cli  # the full command set, serve included

DOCS = Path(__file__).resolve().parents[1] / "docs"
HEADER = """# CLI reference

Generated from `graphmem --help` by `python -m tests.test_docs`; a test fails when it drifts.
Errors print `error [CODE]: message` on stderr and exit with status 1; usage errors exit 2.
Times are ISO-8601 (`2024-05-01`, `2024-05-01T12:00:00Z`) or epoch seconds.
"""


def render_cli_doc() -> str:
    runner = CliRunner()
    parts = [
        HEADER,
        "## graphmem\n",
        "```",
        runner.invoke(cli, ["--help"], prog_name="graphmem", terminal_width=100).output.rstrip(),
        "```\n",
    ]
    for name in sorted(cli.commands):
        help_text = runner.invoke(
            cli, [name, "--help"], prog_name="graphmem", terminal_width=100
        ).output.rstrip()
        parts += [f"## graphmem {name}\n", "```", help_text, "```\n"]
    return "\n".join(parts)


def test_the_cli_reference_matches_the_cli() -> None:
    assert (DOCS / "cli.md").read_text(encoding="utf-8") == render_cli_doc(), (
        "docs/cli.md is stale: run `.venv/bin/python -m tests.test_docs`"
    )


def test_every_setting_is_documented_with_its_environment_variable() -> None:
    text = (DOCS / "configuration.md").read_text(encoding="utf-8")
    for name in Settings.model_fields:
        assert f"`{name}`" in text and f"GRAPHMEM_{name.upper()}" in text, name


if __name__ == "__main__":
    (DOCS / "cli.md").write_text(render_cli_doc(), encoding="utf-8")
