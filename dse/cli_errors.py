"""One error format for the command line (README, "Errors"): every problem is one line on
stderr that names what is wrong first (`file:line:col: key.path: message`, `--option:
message`, `dse eval: missing argument WORKLOAD`), with the documented exit code.

Two doors lead here:

- `user_errors` wraps each command: a DseError prints its lines and exits with its code
  (2 bad input, 3 infeasible); an OSError naming a file (permission denied, disk full) is
  bad input too; a closed pipe (`dse list | head -1`) ends quietly; anything else is an
  internal error, exit 1, with the traceback only under DSE_DEBUG=1.
- `DseGroup`, the click group of `dse` and `dse plot`, runs the parser in non-standalone
  mode and turns its usage errors (unknown option or command, missing argument, a value of
  the wrong type) into one line and exit 2, instead of Typer's boxed panel. `--help` and a
  bare `dse` or `dse plot` print the help on stdout and exit 0.
"""

from __future__ import annotations

import difflib
import functools
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import typer
from typer.core import TyperGroup

from dse.errors import DseError, one_line

F = TypeVar("F", bound=Callable[..., Any])

# Exit codes (README, "Commands"): 2 bad input, 1 internal error (a bug), 130 Ctrl-C, 141 a
# reader that closed the pipe (128 + SIGPIPE, as a shell reports a writer killed by it).
BAD_INPUT = 2
INTERNAL = 1
BROKEN_PIPE = 141


def err(text: str) -> None:
    """Print one problem on stderr, on one line whatever it quotes."""
    typer.echo(one_line(text), err=True)


def user_errors(func: F) -> F:
    """Turn DseError into its lines and exit code, anything unexpected into exit 1."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except DseError as e:
            for line in e.lines():
                typer.echo(line, err=True)
            raise typer.Exit(e.exit_code) from None
        except (typer.Exit, typer.Abort, KeyboardInterrupt):
            raise
        except BrokenPipeError:
            _quiet_pipe()
            raise typer.Exit(BROKEN_PIPE) from None
        except OSError as e:
            if e.filename is None:
                _internal(e)
            err(f"{e.filename}: {_os_reason(e)}")
            raise typer.Exit(BAD_INPUT) from None
        except Exception as e:
            _internal(e)

    return wrapper  # type: ignore[return-value]


def _internal(e: BaseException) -> None:
    """A bug: one line and exit 1; the traceback instead when DSE_DEBUG is set."""
    if os.environ.get("DSE_DEBUG"):
        raise e
    err(f"internal error: {type(e).__name__}: {e} (set DSE_DEBUG=1 for details)")
    raise typer.Exit(INTERNAL) from None


def _os_reason(e: OSError) -> str:
    reason = (e.strerror or type(e).__name__).lower()
    return f"{reason} (writing to {e.filename2})" if e.filename2 else reason


def _quiet_pipe() -> None:
    """After the reader of stdout went away: no further write (nor the flush at exit) may
    raise again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # not a real file (a test runner's buffer)
        pass


# --- usage errors -------------------------------------------------------------------------

def _command(ctx: Any) -> str:
    return ctx.command_path if ctx is not None else "dse"


def _option_names(ctx: Any) -> list[str]:
    if ctx is None:
        return []
    names = [o for p in ctx.command.get_params(ctx)
             for o in (*getattr(p, "opts", ()), *getattr(p, "secondary_opts", ()))
             if o.startswith("-")]
    return sorted(dict.fromkeys(names))


def _closest(word: str, choices: Sequence[str]) -> str | None:
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return close[0] if close else None


def _param_name(param: Any, ctx: Any) -> str:
    """How a message names a parameter: an option by its long name (`--chips`), an argument
    by its command and metavar (`dse eval WORKLOAD`)."""
    opts = [o for o in getattr(param, "opts", ()) if o.startswith("-")]
    if opts and getattr(param, "param_type_name", "") == "option":
        return max(opts, key=len)
    name = getattr(param, "metavar", None) or getattr(param, "name", None) or "argument"
    return f"{_command(ctx)} {str(name).upper()}"


def _bad_value(e: Any) -> str:
    """The message of a value that did not convert (Typer validates with pydantic: its error
    is the cause) in the project's words."""
    from pydantic import ValidationError

    from dse.spec.messages import describe

    cause = e.__cause__
    value = None
    if isinstance(cause, ValidationError) and cause.errors():
        first = cause.errors(include_url=False)[0]
        value = first.get("input")
        choices = _choices(e.param)
        if choices and isinstance(value, str):
            close = _closest(value, choices)
            return (f"expected one of: {', '.join(choices)}, found {value!r}"
                    + (f"; did you mean {close}?" if close else ""))
        return describe(first)
    return _sentence(e.message)


def _choices(param: Any) -> list[str]:
    """The values a choice parameter (an enum) accepts, as typed."""
    descriptor = getattr(param, "type_descriptor", None)
    if descriptor is None or not getattr(descriptor, "is_choice", False):
        return []
    return [str(getattr(c, "value", c)) for c in descriptor.choices or ()]


def _sentence(text: str) -> str:
    """Click's message as a clause: lower-case first letter, no final period."""
    text = text.strip().rstrip(".")
    return text[:1].lower() + text[1:]


def usage_line(e: Any) -> str:
    """One line for a click usage error, naming the option, argument or command first."""
    from typer._click import exceptions as ce

    ctx = getattr(e, "ctx", None)
    command = _command(ctx)
    help_hint = f"see {command} --help"
    if isinstance(e, ce.NoSuchOption):
        options = _option_names(ctx)
        close = _closest(e.option_name, options) or next(iter(e.possibilities or ()), None)
        hint = f"; did you mean {close}?" if close else f" ({help_hint})"
        return f"{e.option_name}: no such option of {command}{hint}"
    if isinstance(e, ce.MissingParameter):
        if e.param is None:
            return f"{command}: missing parameter ({help_hint})"
        name = _param_name(e.param, ctx)
        if getattr(e.param, "param_type_name", "") == "option":
            return f"{name}: required option missing ({help_hint})"
        return f"{command}: missing argument {name.removeprefix(command).strip()} " \
               f"({help_hint})"
    if isinstance(e, ce.BadParameter):
        name = _param_name(e.param, ctx) if e.param is not None else command
        return f"{name}: {_bad_value(e)}"
    if isinstance(e, ce.BadOptionUsage):
        message = e.message
        if "requires" in message and "argument" in message:
            return f"{e.option_name}: expected a value after it"
        return f"{e.option_name}: {_sentence(message)}"
    message = e.message
    if message.startswith("No such command"):
        return _no_such_command(ctx, message)
    if message.startswith("Got unexpected extra argument"):
        extra = message.removeprefix("Got unexpected extra argument(s)").strip()
        extra = extra.removeprefix("(").removesuffix(")")
        return f"{command}: unexpected extra argument(s) {extra} ({help_hint})"
    return f"{command}: {_sentence(message)} ({help_hint})"


def _no_such_command(ctx: Any, message: str) -> str:
    import ast

    command = _command(ctx)
    quoted = message.removeprefix("No such command").strip().split(". Did you mean")[0]
    quoted = quoted.rstrip(".")
    try:
        name = str(ast.literal_eval(quoted))
    except (ValueError, SyntaxError):
        name = quoted.strip("'\"")
    names = ctx.command.list_commands(ctx) if ctx is not None else []
    close = _closest(name, names)
    hint = f"; did you mean {close}?" if close else f"; expected one of: {', '.join(names)}"
    return f"{command} {name}: no such command{hint}"


class DseGroup(TyperGroup):
    """The `dse` group: usage errors as one line and exit 2 (see the module's doc)."""

    def main(self, args: Sequence[str] | None = None, prog_name: str | None = None,
             complete_var: str | None = None, standalone_mode: bool = True,
             **extra: Any) -> Any:
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        from typer._click import exceptions as ce

        try:
            code = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except ce.NoArgsIsHelpError:  # a bare `dse` or `dse plot` asks for the help: it is
            sys.exit(0)  # printed (stdout); nothing was wrong, so exit 0, as --help does
        except ce.UsageError as e:
            err(usage_line(e))
            sys.exit(BAD_INPUT)
        except ce.ClickException as e:
            err(e.format_message())
            sys.exit(BAD_INPUT)
        except typer.Abort:
            err("aborted")
            sys.exit(130)
        # Non-standalone, click returns the exit code of a typer.Exit (0 for --help and
        # --version) or what the command returned (None: success).
        sys.exit(code if isinstance(code, int) and not isinstance(code, bool) else 0)
