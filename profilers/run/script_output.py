"""What a launched script printed, and how its processes ended, as the run's error tells them.

A run of one process writes the script's output to ``stdout.log`` / ``stderr.log`` in its folder;
under ``torchrun`` each rank's goes to ``ranks/<id>/attempt_<n>/<local rank>/`` and the folder's
``stderr.log`` is torchrun's own, whose failure summary names each failed rank and its exit code,
the first one as the root cause. From these:

- :func:`torchrun_failures`: the ranks torchrun reported failed, the root cause first;
- :func:`exit_wording`: the status and the words for a process that ended without a result —
  ``failed`` with the failing rank when a rank exited non-zero (the others torchrun then stopped are
  said as stopped, not as the cause), ``killed`` only when a kill signal ended the process or the
  rank at the root;
- :func:`printed_tail` / :func:`with_printed`: the last lines the script itself printed (stdout,
  then stderr), from each rank that failed, put at the end of the error's first line and below it.
"""

from __future__ import annotations

import os
import re
import signal
from dataclasses import dataclass
from pathlib import Path

from profilers.run.records import RunStatus

EXIT_OUT_OF_MEMORY = 75
KILL_SIGNALS = {"SIGKILL", "SIGTERM", "SIGINT", "SIGHUP"}
TAIL_LINES = 8  # of each stream of each rank
INLINE_CHARS = 300  # the printed lines on the error's first line, joined
TAIL_READ_BYTES = 16 * 1024
PRINTED = "the script printed"
_TORCHRUN_KILLED = re.compile(r"Signal \d+ \((SIGKILL|SIGTERM|SIGINT|SIGHUP)\) received")
_ENTRY = re.compile(r"rank\s*:\s*(\d+)\s*\(local_rank:\s*(\d+)\)\s*\n\s*exitcode\s*:\s*(-?\d+)")
_OURS = ("stepwise:",)  # lines the runner itself adds to a log
# the profiler's own lines in the script's stderr (libkineto's USDT probes, its glog warnings): not
# the script's words
_PROFILER_NOISE = re.compile(
    r"^(USDT:|STAGE:|\[[WIE]\d{4} [^\]]*\] .*(?:[Pp]rofil|Kineto|CPUAllocator))"
)


@dataclass(frozen=True)
class RankExit:
    """One rank torchrun reported failed: its global and local rank, its exit code (negative: a
    signal)."""

    rank: int
    local_rank: int
    exit_code: int

    @property
    def signal_name(self) -> str | None:
        if self.exit_code >= 0:
            return None
        try:
            return signal.Signals(-self.exit_code).name
        except ValueError:
            return f"signal {-self.exit_code}"


def _read_tail(path: Path) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - TAIL_READ_BYTES))
            return fh.read().decode("utf-8", errors="replace")
    except OSError:
        return ""


def torchrun_failures(run_dir: Path) -> list[RankExit]:
    """The ranks torchrun's failure summary (in the folder's ``stderr.log``) names, the root cause
    first."""
    text = _read_tail(run_dir / "stderr.log")
    at = text.rfind("Root Cause")
    if at < 0:
        return []
    entries = [RankExit(int(m[1]), int(m[2]), int(m[3])) for m in _ENTRY.finditer(text[at:])]
    start = text.rfind("Failures:", 0, at)
    others = (
        [RankExit(int(m[1]), int(m[2]), int(m[3])) for m in _ENTRY.finditer(text[start:at])]
        if start >= 0
        else []
    )
    return entries[:1] + [e for e in others if e not in entries[:1]]


def _stopped_by_torchrun(e: RankExit) -> bool:
    return e.signal_name == "SIGTERM"  # torchrun ends the other ranks with SIGTERM once one failed


def failed_ranks(run_dir: Path) -> list[int]:
    """The ranks whose own end failed the run: the root cause and any other that exited non-zero by
    itself."""
    failures = torchrun_failures(run_dir)
    return [e.rank for i, e in enumerate(failures) if i == 0 or not _stopped_by_torchrun(e)]


def exit_wording(run_dir: Path, code: int) -> tuple[RunStatus, str]:
    """Status and words for a process that ended with ``code`` and no result (see the module
    docs)."""
    failures = torchrun_failures(run_dir)
    if code >= 0 and failures:
        root = failures[0]
        stopped = [e.rank for e in failures[1:] if _stopped_by_torchrun(e)]
        after = (
            f" (torchrun then stopped rank{'s' if len(stopped) > 1 else ''} "
            f"{', '.join(map(str, stopped))})"
            if stopped
            else ""
        )
        name = root.signal_name
        if name is not None:
            status = RunStatus.KILLED if name in KILL_SIGNALS else RunStatus.FAILED
            return status, f"rank {root.rank} was killed by {name}{after}"
        if root.exit_code == EXIT_OUT_OF_MEMORY:
            return (
                RunStatus.OUT_OF_MEMORY,
                f"rank {root.rank} exited with code 75 (out of memory){after}",
            )
        return RunStatus.FAILED, f"rank {root.rank} exited with code {root.exit_code}{after}"
    return classify_code(code, _read_tail(run_dir / "stderr.log"))


def classify_code(code: int, stderr_text: str = "") -> tuple[RunStatus, str]:
    """Status and words from an exit code alone: a kill signal means ``killed``."""
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        status = RunStatus.KILLED if name in KILL_SIGNALS else RunStatus.FAILED
        return status, f"the process was killed by {name}"
    if code == EXIT_OUT_OF_MEMORY:
        return RunStatus.OUT_OF_MEMORY, "the process exited with code 75 (out of memory)"
    if code in (128 + signal.SIGKILL, 128 + signal.SIGTERM):
        return RunStatus.KILLED, f"the process exited with code {code} (killed by a signal)"
    if _TORCHRUN_KILLED.search(stderr_text):
        return (
            RunStatus.KILLED,
            f"the process exited with code {code} after a rank was killed by a signal",
        )
    return RunStatus.FAILED, f"the process exited with code {code}"


def _rank_folders(run_dir: Path) -> dict[int, Path]:
    """Each local rank's log folder of the newest torchrun attempt
    (``ranks/<id>/attempt_<n>/<rank>``)."""
    attempts = [p for p in run_dir.glob("ranks/*/attempt_*") if p.is_dir()]
    if not attempts:
        return {}
    newest = max(attempts, key=lambda p: (p.stat().st_mtime, p.name))
    return {int(p.name): p for p in newest.iterdir() if p.is_dir() and p.name.isdigit()}


def _lines(path: Path) -> list[str]:
    lines = [line.rstrip() for line in _read_tail(path).splitlines()]
    return [
        line
        for line in lines
        if line.strip() and not line.startswith(_OURS) and not _PROFILER_NOISE.match(line)
    ][-TAIL_LINES:]


def printed_tail(run_dir: Path, ranks: list[int] | None = None) -> dict[int | None, list[str]]:
    """The last lines the script printed (stdout's, then stderr's): ``{None: lines}`` for a run of
    one process, else ``{rank: lines}`` for ``ranks`` (default: those :func:`failed_ranks` names,
    else every rank that printed anything). Streams that printed nothing are left out."""
    folders = _rank_folders(run_dir)
    if not folders:
        lines = _lines(run_dir / "stdout.log") + _lines(run_dir / "stderr.log")
        return {None: lines} if lines else {}
    wanted = ranks if ranks is not None else failed_ranks(run_dir)
    out: dict[int | None, list[str]] = {}
    for rank in wanted or sorted(folders):
        folder = folders.get(rank)
        lines = (_lines(folder / "stdout.log") + _lines(folder / "stderr.log")) if folder else []
        if lines:
            out[rank] = lines
    return out


def with_printed(error: str | None, run_dir: Path, ranks: list[int] | None = None) -> str | None:
    """``error`` with the script's last printed lines: joined at the end of its first line (``…; the
    script printed: …``) and in full below it. Lines the error already holds (a traceback it quotes)
    are not repeated; nothing is added when the script printed nothing, or when the error already
    says what it printed."""
    if error is not None and PRINTED in error:
        return error
    tails = printed_tail(run_dir, ranks)
    said = error or ""
    tails = {r: [line for line in lines if line.strip() not in said] for r, lines in tails.items()}
    tails = {r: lines for r, lines in tails.items() if lines}
    if not tails:
        return error
    first, _, rest = (error or "the run failed").partition("\n")
    inline = " | ".join(line.strip() for lines in tails.values() for line in lines[-3:])
    whole = len(inline) <= INLINE_CHARS and all(len(lines) <= 3 for lines in tails.values())
    if len(inline) > INLINE_CHARS:
        inline = "…" + inline[-INLINE_CHARS:]
    block = []
    # below the first line: only when it could not hold them all
    for rank, lines in ({} if whole else tails).items():
        block.append(f"{PRINTED}" + (f" (rank {rank}):" if rank is not None else ":"))
        block += [f"  {line}" for line in lines]
    only = next(iter(tails)) if len(tails) == 1 else None
    who = f" (rank {only})" if only is not None else ""
    head = f"{first.rstrip(' .;:')}; {PRINTED}{who}: {inline}"
    return "\n".join([head, *([rest] if rest else []), *block])


def error_line(error: str | None, limit: int = 200) -> str:
    """An error's first line in ``limit`` characters for a table's cell: its start and its end kept
    (the end holds what the script printed), the middle cut."""
    first = (error or "").partition("\n")[0].strip()
    if len(first) <= limit:
        return first
    head = max(limit // 3, 1)
    return f"{first[:head].rstrip()} … {first[-(limit - head - 3) :].lstrip()}"
