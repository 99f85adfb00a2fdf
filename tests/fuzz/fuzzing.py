"""The fuzz suite's runner, profiles and the promise it asserts (issue 15, item 5).

The promise: whatever the input, `dse` answers with exit 0 and finite, positive metrics, or
with one line per problem and exit 2 (bad input) or 3 (an infeasible design, from `dse eval`
and `dse memory`), within a time and memory budget; never a traceback, never exit 1 (an
internal error), never Infinity or NaN in JSON.

Profiles (environment variable DSE_FUZZ): `fast` (the default test run: a few hundred inputs
in all) and `long` (CI: thousands). Both are derandomized, so a CI run is reproducible
and a red one is not luck; a failure prints a `@reproduce_failure` blob. DSE_FUZZ_RANDOM=1
makes the long profile draw a new random sample (to explore beyond the fixed one).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import resource
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from hypothesis import HealthCheck, Phase, event, settings
from hypothesis.control import currently_in_test_context
from typer.testing import CliRunner

from dse.cli import app

ROOT = Path(__file__).resolve().parents[2]

PROFILE = os.environ.get("DSE_FUZZ", "fast")
if PROFILE not in ("fast", "long"):
    raise RuntimeError(f"DSE_FUZZ={PROFILE!r}: expected fast or long")
_COMMON = dict(deadline=None, database=None, print_blob=True,
               phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink],
               suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                      HealthCheck.filter_too_much])
settings.register_profile("dse-fuzz-fast", derandomize=True, **_COMMON)
settings.register_profile("dse-fuzz-long", derandomize=os.environ.get("DSE_FUZZ_RANDOM") != "1",
                          **_COMMON)  # CI: reproducible; DSE_FUZZ_RANDOM=1 explores
_PROFILE_SETTINGS = settings.get_profile(f"dse-fuzz-{PROFILE}")


def examples(fast: int, long: int) -> settings:
    """Hypothesis settings for one fuzz test: `fast` examples in the default run, `long` in
    CI (DSE_FUZZ=long). The profile is applied per test, not loaded globally, so the rest of
    the suite keeps its own settings."""
    return settings(_PROFILE_SETTINGS, max_examples=long if PROFILE == "long" else fast)


# --- budgets ---------------------------------------------------------------------------------

CASE_SECONDS = 10.0  # wall time of one command (typical: 0.05-0.5 s)
CASE_BYTES = 1 << 30  # address space one command may add (in a subprocess: its whole)
SUBPROCESS_SECONDS = 20.0  # with interpreter start-up (~1.5 s) and a loaded CI machine
SUBPROCESS_AS_BYTES = 1 << 30  # address-space limit of a subprocess (RLIMIT_AS)


@dataclass
class Ran:
    args: tuple[str, ...]
    code: int  # 124: stopped past the time limit
    stdout: str
    stderr: str
    seconds: float
    exception: BaseException | None = None

    def __str__(self) -> str:
        out = self.stdout if len(self.stdout) < 2000 else self.stdout[:2000] + "..."
        return (f"dse {' '.join(_shown(a) for a in self.args)}\n  exit {self.code} in "
                f"{self.seconds:.2f} s\n  stdout: {out!r}\n  stderr: {self.stderr!r}"
                + (f"\n  exception: {self.exception!r}" if self.exception else ""))


def _shown(arg: str) -> str:
    return arg if re.fullmatch(r"[\w./:=,+@%-]+", arg) else repr(arg)


class CaseTimeout(BaseException):
    """Raised by the alarm in a command that runs past twice the time budget (a
    BaseException, so that no `except Exception` in dse turns it into an answer)."""


def _address_space() -> int | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


@contextlib.contextmanager
def budget() -> Iterator[None]:
    """Run the body with CASE_BYTES more address space than the process has now (a soft
    RLIMIT_AS, restored after: an allocation beyond it is a MemoryError) and stop it with
    CaseTimeout at twice CASE_SECONDS."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    size = _address_space()
    limit = None if size is None else size + CASE_BYTES
    if limit is not None and (hard == resource.RLIM_INFINITY or limit <= hard):
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))

    def stop(signum: int, frame: object) -> None:
        raise CaseTimeout(f"past {2 * CASE_SECONDS:.0f} s")

    previous = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, 2 * CASE_SECONDS)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


_RUNNER = CliRunner()


def dse(*args: str | Path) -> Ran:
    """`dse ARGS` in this process, through Typer's test runner, timed, within the budget."""
    argv = tuple(str(a) for a in args)
    start = time.monotonic()
    try:
        with budget():
            r = _RUNNER.invoke(app, list(argv))
    except CaseTimeout as e:
        return Ran(argv, 124, "", "", time.monotonic() - start, e)
    exception = r.exception if not isinstance(r.exception, SystemExit) else None
    return Ran(argv, r.exit_code, r.stdout, r.stderr, time.monotonic() - start, exception)


def _limits() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (SUBPROCESS_AS_BYTES, SUBPROCESS_AS_BYTES))


def dse_subprocess(*args: str | Path, cwd: Path = ROOT,
                   seconds: float = SUBPROCESS_SECONDS, stdout: str = "pipe") -> Ran:
    """`python -m dse ARGS` from this checkout in a subprocess, under SUBPROCESS_AS_BYTES of
    address space and `seconds`; a run past the time limit is exit 124. `stdout`: "pipe"
    (captured), "full" (/dev/full: every write fails, a full disk) or "cut" (a pipe whose
    reader takes one byte and closes it, as `| head -c1`)."""
    argv = tuple(str(a) for a in args)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p),
        "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
        "MPLBACKEND": "Agg", "COLUMNS": "120"}
    env.pop("DSE_DEBUG", None)
    start = time.monotonic()
    if stdout != "pipe":
        return _unusual_stdout(argv, cwd, env, seconds, stdout, start)
    try:
        r = subprocess.run([sys.executable, "-m", "dse", *argv], cwd=cwd, env=env,
                           capture_output=True, text=True, errors="replace",
                           timeout=seconds, preexec_fn=_limits)
    except subprocess.TimeoutExpired as e:
        return Ran(argv, 124, _text(e.stdout), _text(e.stderr), time.monotonic() - start)
    return Ran(argv, r.returncode, r.stdout, r.stderr, time.monotonic() - start)


def _unusual_stdout(argv: tuple[str, ...], cwd: Path, env: dict[str, str], seconds: float,
                    stdout: str, start: float) -> Ran:
    """dse_subprocess with standard output on /dev/full or on a pipe cut short."""
    command = [sys.executable, "-m", "dse", *argv]
    with open(os.devnull if stdout == "cut" else "/dev/full", "wb") as sink:
        p = subprocess.Popen(command, cwd=cwd, env=env, preexec_fn=_limits,
                             stdout=subprocess.PIPE if stdout == "cut" else sink,
                             stderr=subprocess.PIPE)
        first = b""
        if stdout == "cut":
            assert p.stdout is not None
            first = p.stdout.read(1)
            p.stdout.close()
        try:
            _, err = p.communicate(timeout=seconds)
        except subprocess.TimeoutExpired:
            p.kill()
            _, err = p.communicate()
            return Ran(argv, 124, _text(first), _text(err), time.monotonic() - start)
    return Ran(argv, p.returncode, _text(first), _text(err), time.monotonic() - start)


def _text(b: bytes | str | None) -> str:
    if isinstance(b, bytes):
        return b.decode("utf-8", "replace")
    return b or ""


# --- the promise -----------------------------------------------------------------------------

# Symptoms of messages that are not the project's one-line format.
_PANEL = re.compile(r"[╭╮╰╯│─]")  # Typer's boxed usage-error panel
_PYDANTIC = "Input should be"  # pydantic's own wording, which names neither path nor value
# One problem a line: `where: message`, where names the file (file:line:col: key.path), the
# flag (--seq-in, --set path; a line may also start with the flag: "--chips 3 is not ...") or
# the thing (gemm:0x1x1, bert-base scenario 'x'). A value holding a newline used to continue
# a message on a line of its own (U3 of shared/repro).
_LINE = re.compile(r"^(?:--[a-z][\w-]*\b|\S[^\n]*?: \S)")


def symptoms(stderr: str) -> list[tuple[str, str]]:
    """(symptom, detail) for what keeps `stderr` from being one `where: message` line per
    problem: traceback, panel (Typer's usage error), pydantic (its wording), line (a line
    that continues the one before: blank or indented), where (a message that does not say
    where: no `where: ` before it)."""
    found = []
    if "Traceback" in stderr:
        found.append(("traceback", "a traceback"))
    if _PANEL.search(stderr) or stderr.startswith("Usage:"):
        return [*found, ("panel", "a usage-error panel over several lines")]
    if _PYDANTIC in stderr:
        found.append(("pydantic", "pydantic's 'Input should be' wording"))
    for line in stderr.splitlines():
        if not line.strip() or line[0].isspace():
            found.append(("line", f"a line that continues the one before: {line!r}"))
            break
        if not _LINE.match(line):
            found.append(("where", f"a message that does not say where: {line!r}"))
            break
    return found


def line_problems(stderr: str) -> list[str]:
    """What keeps `stderr` from being one `where: message` line per problem."""
    return [detail for _, detail in symptoms(stderr)]


class PromiseBroken(AssertionError):
    pass


def _fail(ran: Ran, why: str) -> None:
    raise PromiseBroken(f"{why}\n{ran}")


def strict_json(text: str) -> object:
    """JSON as a strict reader takes it: Infinity, -Infinity and NaN are errors."""
    def refuse(word: str) -> None:
        raise ValueError(f"JSON holds {word}")
    return json.loads(text, parse_constant=refuse)


def assert_promise(ran: Ran, *, infeasible: bool = False, json_out: bool = False) -> object:
    """Assert the promise for one run and return its JSON document (exit 0 or 3 with
    `json_out`), else None. `infeasible`: exit 3 is an answer for this command."""
    if currently_in_test_context():
        event(f"dse {_shown(ran.args[0]) if ran.args else ''}: exit {ran.code}")
    if ran.code == 124:
        _fail(ran, "stopped: it ran past the time limit")
    if ran.exception is not None:
        _fail(ran, f"an exception escaped: {type(ran.exception).__name__}")
    if ran.seconds > CASE_SECONDS:
        _fail(ran, f"took {ran.seconds:.1f} s, above the budget of {CASE_SECONDS} s")
    if "Traceback" in ran.stdout + ran.stderr:
        _fail(ran, "a traceback")
    allowed = (0, 2, 3) if infeasible else (0, 2)
    if ran.code not in allowed:
        _fail(ran, f"exit {ran.code}, expected one of {allowed}")
    if ran.code == 2:
        if not ran.stderr.strip():
            _fail(ran, "exit 2 without a message")
        problems = line_problems(ran.stderr)
        if problems:
            _fail(ran, "the error is not one line per problem: " + "; ".join(problems))
        return None
    problems = line_problems(ran.stderr)
    if problems:
        _fail(ran, "warnings are not one line each: " + "; ".join(problems))
    if not json_out:
        return None
    try:
        return strict_json(ran.stdout)
    except ValueError as e:
        _fail(ran, f"stdout is not strict JSON: {e}")
    return None


def finite_numbers(doc: object, where: str = "") -> list[str]:
    """Paths of numbers in `doc` that are not finite (a strict JSON has none; for the API)."""
    bad = []
    if isinstance(doc, dict):
        for k, v in doc.items():
            bad += finite_numbers(v, f"{where}.{k}")
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            bad += finite_numbers(v, f"{where}[{i}]")
    elif isinstance(doc, float) and not math.isfinite(doc):
        bad.append(where)
    return bad


# Metrics every feasible evaluation has (one of each group), positive and finite.
_TIMES = ("latency_s", "step_time_s")
_RATES = ("output_tokens_per_s", "decode_tokens_per_s", "samples_per_s", "tokens_per_s",
          "achieved_flop_per_s")


def metric_problems(metrics: dict[str, object], feasible: bool) -> list[str]:
    """What is wrong with one design's metrics (JSON or the API's values for one design):
    a feasible design has a positive, finite time and rate; no metric is negative or
    infinite; memory bytes are finite and not negative; MFU is at most 1."""
    found = []
    for k, v in metrics.items():
        if k == "memory_per_chip_bytes":
            for level, b in (v or {}).items():
                if b is None or not math.isfinite(b) or b < 0:
                    found.append(f"memory_bytes.{level} = {b}")
            continue
        if v is None or (isinstance(v, float) and math.isnan(v)):
            continue
        if isinstance(v, bool) or not isinstance(v, int | float):
            found.append(f"{k} = {v!r} is not a number")
        elif not math.isfinite(v) or v < 0:
            found.append(f"{k} = {v}")
    mfu = metrics.get("mfu")  # S4: a share of the peak (model branch)
    if isinstance(mfu, int | float) and math.isfinite(mfu) and mfu > 1 + 1e-9:
        found.append(f"mfu = {mfu} is above 1 (more than the peak)")
    if feasible:
        def positive(key: str) -> bool:
            v = metrics.get(key)
            return isinstance(v, int | float) and math.isfinite(v) and v > 0
        if not any(positive(k) for k in _TIMES):
            found.append("a feasible design without a positive, finite time (" +
                         ", ".join(f"{k}={metrics.get(k)}" for k in _TIMES) + ")")
        if not any(positive(k) for k in _RATES):
            found.append("a feasible design without a positive, finite rate (" +
                         ", ".join(f"{k}={metrics.get(k)}" for k in _RATES) + ")")
    return found


def assert_eval_doc(ran: Ran, doc: object) -> None:
    """`dse eval --format json`: each design feasible with good metrics, or infeasible with
    a reason; exit 3 exactly when some design is infeasible."""
    designs = doc if isinstance(doc, list) else [doc]
    if not designs:
        _fail(ran, "no designs in the JSON")
    infeasible = 0
    for i, d in enumerate(designs):
        if not isinstance(d, dict) or "metrics" not in d or "feasible" not in d:
            _fail(ran, f"design {i}: no metrics or feasible in {str(d)[:200]}")
        if not d["feasible"]:
            infeasible += 1
            if not d.get("reason"):
                _fail(ran, f"design {i}: infeasible without a reason")
        problems = metric_problems(d["metrics"], bool(d["feasible"]))
        if problems:
            _fail(ran, f"design {i}: " + "; ".join(problems))
    if (ran.code == 3) != (infeasible > 0):
        _fail(ran, f"exit {ran.code} with {infeasible} of {len(designs)} designs infeasible")
