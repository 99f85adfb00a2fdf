"""One error format for the command line (docs: guide/commands.md, Errors): every problem is one
line on stderr that names what is wrong first (`file:line:col: key.path: message`, `--option:
message`, `dse eval: missing argument WORKLOAD`), with the documented exit code.

Two doors lead here:

- `user_errors` wraps each command: a DseError prints its lines and exits with its code
  (2 bad input, 3 infeasible); an OSError naming a file (permission denied, disk full) is
  bad input too; a closed pipe (`dse list | head -1`) ends quietly with 141; anything else
  is an internal error, exit 1, with the traceback only under DSE_DEBUG=1.
- `guard_output` (the console script's `main`, before the parser runs) makes standard
  output write all it is given or raise: a reader that closed the pipe is BrokenPipeError
  (exit 141, whatever else the command did), a full disk or another failure is OutputError
  (`dse: cannot write output: No space left on device`, exit 2). It also remembers the last
  file opened for writing, to name it when a write fails on a full disk without saying
  which file (`x.png: no space left on device`).
- `DseGroup`, the click group of `dse` and `dse plot`, runs the parser in non-standalone
  mode and turns its usage errors (unknown option or command, missing argument, a value of
  the wrong type) into one line and exit 2, instead of Typer's boxed panel. `--help` and a
  bare `dse` or `dse plot` print the help on stdout and exit 0.
"""

from __future__ import annotations

import difflib
import errno
import functools
import io
import os
import select
import sys
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import typer
from typer.core import TyperGroup

from dse.errors import DseError, one_line
from dse.search.urls import redact

F = TypeVar("F", bound=Callable[..., Any])

# Exit codes (docs: guide/commands.md): 2 bad input, 1 internal error (a bug), 130 Ctrl-C, 141 a
# reader that closed the pipe (128 + SIGPIPE, as a shell reports a writer killed by it).
BAD_INPUT = 2
INTERNAL = 1
BROKEN_PIPE = 141


def err(text: str) -> None:
    """Print one problem on stderr, on one line whatever it quotes, no password shown."""
    typer.echo(redact(one_line(text)), err=True)


def cli_lines(error: DseError) -> list[str]:
    """The lines of `error` as the command line words them: a structured error's fields as
    the options that set them (`--seq-out: ...`, `--set memory.L2.capacity: ...`)."""
    if error.field is None and not error.also:
        return error.lines()
    from dse.spec.scenario_fields import cli_name

    return [one_line(error.worded(lambda part: cli_name(part)))]


def user_errors(func: F) -> F:
    """Turn DseError into its lines and exit code, anything unexpected into exit 1."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except DseError as e:
            for line in cli_lines(e):
                typer.echo(redact(line), err=True)  # a database URL's password never shows
            raise typer.Exit(e.exit_code) from None
        except (typer.Exit, typer.Abort, KeyboardInterrupt):
            raise
        except OSError as e:
            raise typer.Exit(_os_error(e)) from None
        except Exception as e:
            _internal(e)

    return wrapper  # type: ignore[return-value]


# A write that failed for want of room: the disk (or quota, or file size limit) is full.
_FULL = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})


def _os_error(e: OSError) -> int:
    """The exit code of an OSError that escaped a command, after its one line: a closed
    pipe on stdout ends quietly (141); standard output that cannot be written, a file that
    cannot be read or written (named by the error, or the last file opened for writing when
    a write on a full disk names none) is bad input (2); any other is a bug (1)."""
    if isinstance(e, BrokenPipeError):
        _quiet_stdout()
        return BROKEN_PIPE
    if isinstance(e, OutputError):
        _quiet_stdout()
        err(f"dse: cannot write output: {e.strerror or type(e).__name__}")
        return BAD_INPUT
    name = e.filename
    if name is None and e.errno in _FULL:  # a write that says not which file
        name = _last_written
        if name is None:
            err(f"dse: cannot write: {_os_reason(e)}")
            return BAD_INPUT
    if name is None:
        _internal(e)
    err(f"{name}: {_os_reason(e)}")
    return BAD_INPUT


def _exit_code(e: OSError) -> int:
    """_os_error outside a command: an internal error's exit code instead of typer.Exit."""
    try:
        return _os_error(e)
    except typer.Exit as stop:
        return stop.exit_code


def _internal(e: BaseException) -> None:
    """A bug: one line and exit 1; the traceback instead when DSE_DEBUG is set."""
    if os.environ.get("DSE_DEBUG"):
        raise e
    err(f"internal error: {type(e).__name__}: {e} (set DSE_DEBUG=1 for details)")
    raise typer.Exit(INTERNAL) from None


def _os_reason(e: OSError) -> str:
    reason = (e.strerror or type(e).__name__).lower()
    return f"{reason} (writing to {e.filename2})" if e.filename2 else reason


def _quiet_stdout() -> None:
    """After standard output failed (its reader went away, its disk is full): no further
    write, nor the flush at exit of what is still buffered, may raise again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # not a real file (a test runner's buffer)
        pass


# --- standard output that reports its failures ----------------------------------------------

class OutputError(OSError):
    """Standard output cannot be written (a full disk, an I/O error): not a bug in dse."""


_pipe_closed = False  # the reader of standard output went away (set by _Stdout)
_last_written: str | None = None  # the file last opened for writing (with guard_output)


class _Stdout(io.FileIO):
    """The file descriptor of standard output, writing all it is given or raising.

    Python's own stdout loses a failure after a partial write: a reader that closes the pipe
    while a large write is under way (`dse eval ... -f csv | head -c1`) ends the write short
    with no error, so the command exited 0 instead of 141 (U2 of round 3). A full disk raises
    OutputError, told apart from a file the command writes (T6)."""

    def write(self, data: Any) -> int:
        global _pipe_closed
        view = memoryview(data).cast("B")
        done = 0
        while done < len(view):
            try:
                done += os.write(self.fileno(), view[done:])
            except BlockingIOError:  # a non-blocking descriptor: wait until it takes more
                select.select([], [self.fileno()], [])
            except BrokenPipeError:
                _pipe_closed = True
                raise
            except OSError as e:
                raise OutputError(e.errno, e.strerror) from None
        return done


def _opened(event: str, args: tuple[Any, ...]) -> None:
    """Audit hook: remember the path of each file opened for writing."""
    global _last_written
    if event != "open" or len(args) < 3:
        return
    path, mode, flags = args[:3]
    if isinstance(path, int) or path is None:
        return
    writing = any(c in mode for c in "wax+") if isinstance(mode, str) else \
        bool(isinstance(flags, int) and flags & (os.O_WRONLY | os.O_RDWR))
    if writing and isinstance(path, str | bytes | os.PathLike):
        _last_written = os.fsdecode(path)


def guard_output() -> None:
    """Replace the process's standard output (a real file descriptor, not a test runner's
    buffer) by one that writes all it is given or raises (_Stdout), and start remembering
    the files opened for writing. For the console script, once, before any output."""
    out = sys.stdout
    if out is None or out is not sys.__stdout__ or not isinstance(out, io.TextIOWrapper) \
            or isinstance(getattr(out.buffer, "raw", None), _Stdout):
        return
    try:
        fd = out.fileno()
        out.flush()
    except (OSError, ValueError):
        return
    sys.stdout = io.TextIOWrapper(
        io.BufferedWriter(_Stdout(fd, "w", closefd=False)), encoding=out.encoding,
        errors=out.errors, line_buffering=out.line_buffering)
    sys.addaudithook(_opened)


def pipe_closed() -> bool:
    """Whether the reader of standard output went away during this run."""
    return _pipe_closed


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
             windows_expand_args: bool = True, **extra: Any) -> Any:
        extra["windows_expand_args"] = windows_expand_args
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        from typer._click import exceptions as ce

        try:
            code = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except ce.NoArgsIsHelpError:  # a bare `dse` or `dse plot` asks for the help: it is
            code = 0  # printed (stdout); nothing was wrong, so exit 0, as --help does
        except ce.UsageError as e:
            err(usage_line(e))
            code = BAD_INPUT
        except ce.ClickException as e:
            err(e.format_message())
            code = BAD_INPUT
        except typer.Abort:
            err("aborted")
            code = 130
        except OSError as e:  # writing the help or the version (a command has user_errors)
            code = _exit_code(e)
        # Non-standalone, click returns the exit code of a typer.Exit (0 for --help and
        # --version) or what the command returned (None: success).
        code = code if isinstance(code, int) and not isinstance(code, bool) else 0
        try:  # what is still buffered, now, while a failure can be reported
            if sys.stdout is not None:
                sys.stdout.flush()
        except OSError as e:
            failed = _exit_code(e)
            code = failed if code in (0, 3) else code
        # Output cut short by its reader is 141 whatever else happened (docs: guide/commands.md,
        # Errors).
        sys.exit(BROKEN_PIPE if _pipe_closed else code)
