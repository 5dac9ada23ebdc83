"""DataLoader knobs, injected into the script's own ``DataLoader(...)`` call: ``num_workers``, ``pin_memory``,
``persistent_workers``, ``prefetch_factor`` override its keyword arguments (and ``batch_scale`` its ``batch_size``:
:mod:`stepwise_agent.inject.convergence`); ``cache_decoded`` wraps a map-style
dataset in a cache of decoded samples — only when ``dataset[i]`` is deterministic (a few indices read twice):
a random augmentation would make a cache change what is trained on, so the cache is refused and says why.

Evidence that a knob acted is taken from the loader's iterator once it yields: worker processes alive, batches
pinned, the same iterator reused across epochs, cache hits counted across worker processes.
"""

from __future__ import annotations

import inspect
import multiprocessing
import random
import sys
from typing import Any, Callable

import torch
from torch.utils.data import DataLoader, Dataset, IterableDataset

from stepwise_agent.inject.convergence import ConvergenceInjection
from stepwise_agent.inject.report import InjectionReport
from stepwise_agent.inject.sites import user_site

PROBE_INDICES = 3
MIN_HIT_SHARE = 0.10  # a cache that serves fewer reads than this did not act on the measured steps
CACHE_MEMORY_SHARE = (
    0.25  # refuse a cache whose estimated size exceeds this share of available memory
)
LOADER_KNOBS = ("num_workers", "pin_memory", "persistent_workers", "prefetch_factor")


def _numpy() -> Any:
    """numpy when the script (or its libraries) already imported it; the agent never imports it itself."""
    return sys.modules.get("numpy")


def _is_array(x: Any) -> bool:
    np = _numpy()
    return np is not None and isinstance(x, np.ndarray)


def same_sample(a: Any, b: Any) -> bool:
    """Structural equality of two samples (tensors, arrays, numbers, strings, nested containers)."""
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return (
            isinstance(a, torch.Tensor)
            and isinstance(b, torch.Tensor)
            and a.shape == b.shape
            and a.dtype == b.dtype
            and bool(torch.equal(a, b))
        )
    if _is_array(a) or _is_array(b):
        return (
            _is_array(a)
            and _is_array(b)
            and a.shape == b.shape
            and bool(_numpy().array_equal(a, b))
        )
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same_sample(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_sample(a[k], b[k]) for k in a)
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001 - an object without equality is not known to be the same
        return False


def sample_bytes(x: Any) -> int:
    if isinstance(x, torch.Tensor):
        return x.numel() * x.element_size()
    if _is_array(x):
        return int(x.nbytes)
    if isinstance(x, (list, tuple)):
        return sum(sample_bytes(i) for i in x)
    if isinstance(x, dict):
        return sum(sample_bytes(v) for v in x.values())
    return 64


def loader_batch_size(loader: DataLoader[Any]) -> int | None:
    """Samples per batch: the loader's own ``batch_size``, else its batch sampler's (a ``BatchSampler``,
    accelerate's ``BatchSamplerShard``, or one wrapped in another such as accelerate's ``SkipBatchSampler``)."""
    if isinstance(loader.batch_size, int):
        return loader.batch_size
    sampler: Any = loader.batch_sampler
    for _ in range(3):
        size = getattr(sampler, "batch_size", None)
        if isinstance(size, int):
            return size
        sampler = getattr(sampler, "batch_sampler", None)
        if sampler is None:
            break
    return None


class _RngSaved:
    """Reads made to probe a dataset must not move the script's random streams."""

    def __enter__(self) -> None:
        np = _numpy()
        self.np = np
        self.states = (
            random.getstate(),
            np.random.get_state() if np is not None else None,
            torch.get_rng_state(),
        )

    def __exit__(self, *exc: Any) -> None:
        random.setstate(self.states[0])
        if self.np is not None:
            self.np.random.set_state(self.states[1])
        torch.set_rng_state(self.states[2])


def cache_refusal(ds: Any, available_bytes: int) -> str | None:
    """Why ``ds`` must not be cached, or ``None`` when a cache keeps training the same."""
    if isinstance(ds, IterableDataset) or not hasattr(ds, "__getitem__"):
        return "the dataset is iterable, not map-style: there is no index to cache by"
    try:
        n = len(ds)
    except TypeError:
        return "the dataset has no length"
    if n == 0:
        return "the dataset is empty"
    picks = sorted({0, n // 2, n - 1})[:PROBE_INDICES]
    with _RngSaved():
        for i in picks:
            first, second = ds[i], ds[i]
            if not same_sample(first, second):
                return (
                    f"dataset[{i}] returned different samples on two reads (a random augmentation?): a cache "
                    "would train on one frozen draw instead of fresh ones"
                )
        size = sample_bytes(ds[picks[0]]) * n
    if size > CACHE_MEMORY_SHARE * available_bytes:
        return (
            f"caching all {n} samples would take about {size / 2**30:.1f} GiB, over "
            f"{CACHE_MEMORY_SHARE:.0%} of the {available_bytes / 2**30:.1f} GiB available"
        )
    return None


class CachedDataset(Dataset[Any]):
    """The script's dataset with each decoded sample kept after its first read (per process: worker processes
    each fill their own). Hits and misses are counted in shared memory so the launcher sees workers' hits."""

    def __init__(self, ds: Any) -> None:
        self.ds = ds
        self.cache: dict[int, Any] = {}
        self.hits = multiprocessing.get_context("fork").RawValue("q", 0)
        self.misses = multiprocessing.get_context("fork").RawValue("q", 0)

    def __len__(self) -> int:
        return len(self.ds)

    def __getitem__(self, i: int) -> Any:
        if i in self.cache:
            self.hits.value += 1
            return self.cache[i]
        self.misses.value += 1
        item = self.ds[i]
        self.cache[i] = item
        return item

    def __getattr__(self, name: str) -> Any:  # the script may read its dataset's own attributes
        if name in ("ds", "cache", "hits", "misses"):
            raise AttributeError(name)
        return getattr(self.ds, name)


class LoaderInjection:
    """Overrides the keyword arguments of every ``DataLoader(...)`` the script builds; watches the first one
    that yields a batch (the training loader) for the evidence."""

    def __init__(
        self,
        knobs: dict[str, Any],
        report: InjectionReport,
        available_bytes: int,
        convergence: ConvergenceInjection | None = None,
    ) -> None:
        self.knobs = {k: v for k, v in knobs.items() if k in LOADER_KNOBS or k == "cache_decoded"}
        self.report, self.available = report, available_bytes
        self.convergence = convergence
        self.loaders: dict[int, dict[str, Any]] = {}
        self.training: int | None = None
        self.iterators: set[int] = set()
        self.caches: list[CachedDataset] = []
        self.observe: set[str] = (
            set()
        )  # knobs the script's own flags set: checked, never overridden
        self._undo: list[Callable[[], None]] = []

    def install(self) -> None:
        original_init = DataLoader.__init__
        signature = inspect.signature(original_init)
        me = self

        def init(loader: DataLoader[Any], *args: Any, **kwargs: Any) -> None:
            bound = signature.bind(loader, *args, **kwargs)
            bound.apply_defaults()
            site = user_site(obj=loader)
            asked = {k: bound.arguments[k] for k in LOADER_KNOBS}
            given = bound.arguments.get("dataset")
            me._override(bound.arguments)
            if me.convergence is not None:
                me.convergence.scale_batch(bound.arguments, site)
            original_init(*bound.args, **bound.kwargs)
            me.loaders[id(loader)] = {
                "site": site,
                "asked": asked,
                "effective": {k: bound.arguments[k] for k in LOADER_KNOBS},
                "batch_size": loader_batch_size(loader),
                "dataset": type(bound.arguments["dataset"]).__name__,
                "datasets": {id(given), id(bound.arguments.get("dataset"))},
            }

        original_get = DataLoader._get_iterator

        def get_iterator(loader: DataLoader[Any]) -> Any:
            it = original_get(loader)  # built: its worker processes exist
            me._iterator_made(it, loader)
            return it

        # setattr: the patch replaces the methods by wrappers of a wider signature, as the undo below puts them back
        setattr(DataLoader, "__init__", init)
        setattr(DataLoader, "_get_iterator", get_iterator)
        self._undo += [
            lambda: setattr(DataLoader, "__init__", original_init),
            lambda: setattr(DataLoader, "_get_iterator", original_get),
        ]

    def uninstall(self) -> None:
        while self._undo:
            self._undo.pop()()

    def _override(self, args: dict[str, Any]) -> None:
        for knob in ("num_workers", "pin_memory"):
            if knob in self.knobs and knob not in self.observe:
                args[knob] = self.knobs[knob]
        workers = int(args.get("num_workers") or 0)
        for knob in ("persistent_workers", "prefetch_factor"):
            if knob in self.knobs and knob not in self.observe:
                if workers > 0:
                    args[knob] = self.knobs[knob]
                else:
                    self._refuse(
                        knob, f"{knob} needs worker processes; this DataLoader has num_workers=0"
                    )
        if self.knobs.get("cache_decoded"):
            why = cache_refusal(args["dataset"], self.available)
            if why is not None:
                self._refuse("cache_decoded", why)
            else:
                cached = CachedDataset(args["dataset"])
                self.caches.append(cached)
                args["dataset"] = cached
                if workers > 0 and not args.get("persistent_workers"):
                    args["persistent_workers"] = True  # each worker keeps its cache across epochs

    def _refuse(self, knob: str, why: str) -> None:
        r = self.report.knob(knob)
        if r is not None:
            r.refuse(why)

    def _iterator_made(self, it: Any, loader: DataLoader[Any]) -> None:
        info = self.loaders.get(id(loader))
        if info is None:
            return
        site = self._users_site(info)
        self.report.site(
            "dataloader",
            site,
            **{k: info["asked"][k] for k in LOADER_KNOBS},
            batch_size=info["batch_size"],
        )  # every loader the knobs acted on; the first trains
        if self.training is None:
            self.training = id(loader)
            self.report.loader = {
                **info["effective"],
                "batch_size": info["batch_size"],
                "dataset": info["dataset"],
            }
            if self.convergence is not None:
                self.convergence.training_loader(info["batch_size"], site)
        if id(loader) != self.training:
            return
        self.iterators.add(id(it))
        self._evidence(it, loader)

    def _users_site(self, info: dict[str, Any]) -> dict[str, Any] | None:
        """A loader a library rebuilt from the user's (accelerate's ``prepare``, Lightning re-instantiating it
        for a sampler) is changed at the user's own ``DataLoader(...)`` it was rebuilt from: the one holding the
        same dataset (a script that builds its training loader, then its evaluation loader, gets the training
        one: issue 42), else the last one the user's code built."""
        site = info["site"]
        if site is None or "via" not in site:
            return site
        own = [i for i in self.loaders.values() if i["site"] is not None and "via" not in i["site"]]
        same = [i["site"] for i in own if i["datasets"] & info["datasets"]]
        return same[-1] if same else own[-1]["site"] if own else site

    def _evidence(self, it: Any, loader: DataLoader[Any]) -> None:
        r = self.report
        workers = len(getattr(it, "_workers", []) or [])
        if (k := r.knob("num_workers")) is not None:
            if workers and workers == self.knobs["num_workers"]:
                k.act(f"{workers} worker processes started by the DataLoader")
            elif self.knobs["num_workers"] == 0 and workers == 0:
                k.act("the DataLoader loads in the main process")
            else:
                k.refuse(
                    f"the DataLoader started {workers} worker processes, not {self.knobs['num_workers']}"
                )
        if (k := r.knob("pin_memory")) is not None:
            if getattr(it, "_pin_memory", False):
                k.act("batches are copied to pinned (page-locked) host memory")
            else:
                k.refuse(
                    "no accelerator to pin host memory for: the DataLoader ignored pin_memory=True"
                    if not torch.cuda.is_available()
                    else "the DataLoader did not pin its batches"
                )
        if (k := r.knob("prefetch_factor")) is not None and workers:
            k.act(f"each of {workers} workers keeps {loader.prefetch_factor} batches in flight")
        if (k := r.knob("persistent_workers")) is not None and workers:
            if loader.persistent_workers:
                k.act("worker processes are kept alive across epochs")

    def finish(self) -> None:
        """Evidence that needs the whole run: iterators reused across epochs, cache hits."""
        if (
            (k := self.report.knob("persistent_workers")) is not None
            and k.acted
            and len(self.iterators) > 1
        ):
            k.refuse("a new worker iterator was made for each epoch")
        if (k := self.report.knob("cache_decoded")) is not None and self.caches:
            hits = sum(c.hits.value for c in self.caches)
            misses = sum(c.misses.value for c in self.caches)
            share = hits / (hits + misses) if hits + misses else 0.0
            if share >= MIN_HIT_SHARE:
                k.act(
                    f"{hits} of {hits + misses} sample reads came from the cache of decoded samples"
                )
            elif hits:
                k.refuse(
                    f"only {hits} of {hits + misses} sample reads ({share:.1%}) hit the cache: the run read too few "
                    "samples twice for a cache to matter (the dataset is large against the steps measured)"
                )
            else:
                k.refuse(
                    f"the cache was in place but no read hit it ({misses} reads): the run ended before any "
                    "sample was read a second time (less than one epoch per worker)"
                )
