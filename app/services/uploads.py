"""Turn files dropped in the browser into stored ``upload`` runs — only when they are readable traces.

Each upload is written to a private temporary folder *inside the run store* (``.tmp-upload-…``: never listed,
swept by the store after an hour), analysed there (the same cached analysis the Analysis page will read,
because the cache key is the content digest), and only then imported with ``RunStore.import_trace``. A bad
file therefore never becomes a run: it gets one clear message and the page keeps working.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Protocol, Sequence

from profilers import inputs
from profilers.errors import StepwiseError
from profilers.run.records import RunResult, RunStatus
from profilers.store.runs import RunStore
from profilers.store.files import safe_name
from advisors.analysis import Analysis
from reports.escape import markdown_text

TMP_PREFIX = ".tmp-upload-"


class Uploaded(Protocol):
    """What the page hands over: Streamlit's ``UploadedFile`` or anything with a name and bytes."""

    name: str

    def getvalue(self) -> bytes: ...


@dataclass(frozen=True)
class UploadOutcome:
    """One upload's result: ``run_id`` when it was stored, ``message`` (plain text) either way."""

    name: str
    ok: bool
    message: str
    run_id: str | None = None
    digest: str | None = None  # content digest of the stored trace (the analysis cache key)


def _write(folder: Path, item: Uploaded) -> None:
    target = folder / safe_name(item.name)
    try:
        with open(target, "xb") as fh:
            # getbuffer() is a view of the upload's memory (no 100 MB copy); getvalue() for plain uploads.
            getbuffer = getattr(item, "getbuffer", None)
            fh.write(getbuffer() if getbuffer is not None else item.getvalue())
    except FileExistsError:
        raise StepwiseError(f"two uploaded files share the name {target.name!r}") from None


def refused_name(name: str) -> str | None:
    """Why a file of this name is not read (no input kind takes its suffix), or None when one does."""
    if inputs.upload_kind(name) is not None:
        return None
    return f"not a kind of file Stepwise reads (expected {', '.join(inputs.upload_suffixes())})"


def store_upload(
    store: RunStore,
    items: Sequence[Uploaded],
    validate: Callable[[Path, str], tuple[Analysis, str]],
    job_name: str | None = None,
) -> UploadOutcome:
    """Validate and store one upload: a single file, or (``job_name`` given) several files as the ranks of one
    job. ``validate(path, label)`` analyses the staged copy (raising for a bad trace) and returns the analysis
    and the content digest."""
    label = job_name or (items[0].name if items else "upload")
    refused = next(((item.name, why) for item in items if (why := refused_name(item.name))), None)
    if refused is not None:
        return UploadOutcome(
            label, False, refused[1] if not job_name else f"{refused[0]}: {refused[1]}"
        )
    tmp = Path(tempfile.mkdtemp(prefix=TMP_PREFIX, dir=store.root))
    try:
        if job_name:
            root = tmp / safe_name(job_name)
            root.mkdir()
            for item in items:
                _write(root, item)
        else:
            _write(tmp, items[0])
            root = tmp / safe_name(items[0].name)
        return _import_checked(store, root, label, validate)
    except StepwiseError as err:  # named by the upload's name, never the server's staging path
        return UploadOutcome(label, False, _unstaged(str(err), tmp, label))
    except MemoryError:
        return UploadOutcome(label, False, "the trace needs more memory than this machine has")
    except Exception as err:  # a reader bug must not take the page down; say what happened
        return UploadOutcome(label, False, f"could not be read ({type(err).__name__}: {err})")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _import_checked(
    store: RunStore, root: Path, label: str, validate: Callable[[Path, str], tuple[Analysis, str]]
) -> UploadOutcome:
    """Analyse ``root`` (raising for a bad trace), then store it as an ``upload`` run — or open the stored one of
    the same content — finished with the analysis' step time, ranks and device: the one way a trace becomes a
    run (dropped in the browser, or one rank opened from the Job page)."""
    analysis, digest = validate(root, label)
    known = store.find_upload(digest) if digest else None
    if known is not None:  # the same content again: open the stored one, never a second copy
        return UploadOutcome(
            label,
            True,
            f"the same content as the stored upload {known.label!r}, which is "
            f"opened (nothing stored twice). {analysis.headline}",
            known.run_id,
            digest,
        )
    record = store.import_trace(root, label=label, content_digest=digest)
    b = analysis.breakdown
    if analysis.step_time_ms is not None or b is not None:
        # the run list shows what Analysis shows: the trace's median step, its ranks (an 8-rank zip is 8,
        # not 1) and its device
        store.finish(
            record.run_id,
            RunResult(
                status=RunStatus.OK,
                step_time_ms=analysis.step_time_ms,
                finished_unix=record.created_unix,
                world_size=len(b.ranks) if b is not None and b.ranks else 1,
                device=None if b is None else ("cuda" if b.device == "gpu" else "cpu"),
                device_name=None if b is None else b.device_label,
            ),
        )
    return UploadOutcome(label, True, analysis.headline, record.run_id, digest)


def store_file(
    store: RunStore, path: Path, label: str, validate: Callable[[Path, str], tuple[Analysis, str]]
) -> UploadOutcome:
    """Store one trace file of this machine (a rank of a job folder) as an upload, as :func:`store_upload` does
    with a dropped file: analysed first, stored with its figures, the same content never twice."""
    try:
        return _import_checked(store, path, label, validate)
    except StepwiseError as err:
        return UploadOutcome(label, False, str(err))
    except MemoryError:
        return UploadOutcome(label, False, "the trace needs more memory than this machine has")


def _unstaged(message: str, staging: Path, name: str) -> str:
    """``/runs/.tmp-upload-x1/empty.zip: no trace files`` → ``empty.zip: no trace files``."""
    for prefix in (f"{staging}/{safe_name(name)}", f"{staging}/", str(staging)):
        message = message.replace(prefix, name if prefix.endswith(safe_name(name)) else "")
    return message


def describe(outcome: UploadOutcome) -> str:
    """The outcome as one line of escaped Markdown (names and messages come from files and traces)."""
    name = markdown_text(outcome.name, 120)
    if outcome.ok:
        return f"**{name}** — stored. {markdown_text(outcome.message, 300)}"
    message = outcome.message
    if message.startswith(
        f"{outcome.name}: "
    ):  # the reader names the file too: "x.json — not stored: x.json: …"
        message = message[len(outcome.name) + 2 :]
    return f"**{name}** — not stored: {markdown_text(message, 600)}"
