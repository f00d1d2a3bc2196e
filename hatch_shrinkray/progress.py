"""Where long work is: a live display on a terminal, a plain line at least every ``INTERVAL`` seconds
on a pipe or in CI, nothing with ``-q``.

Work that can take more than a few seconds (``auto``'s analysis and search, cross-fitting, ``check
--search``'s runs, ``wheel``'s models, a recording's merge) opens a task with ``task(label,
total)`` and advances it; whoever runs the command or the build installs a reporter with
``reporting``. Library code never asks whether one is installed: without one, tasks cost nothing
(no thread, no output). Tasks nest: a task opened inside another is shown after it
(``wheel 1/2 > vad.onnx: verifying > shrunk model 120/400``). On a pipe a background ticker
repeats the state of every open task (``auto: sensitivity 12/40 (30%), 41 s so far, about 96 s
left``) whenever nothing was said for ``INTERVAL`` seconds, so no step is silent for long even when
one step takes minutes.

Usage from library code::

    with progress.task("auto: sensitivity", total=len(sites)) as step:
        for site in sites:
            ...
            step.advance()
    for item in progress.tracked(items, "merging"):   # the same, for a loop
        ...

While another program writes to the same terminal (``check`` and ``record`` run the user's
command), ``external()`` suspends a live display and plain lines take its place.

``HATCH_SHRINKRAY_PROGRESS_INTERVAL`` (seconds) sets the interval; tests set it low.

The reporter is found through a context variable: a thread started inside ``reporting`` sees none
unless it runs in a copy of the context (``contextvars.copy_context().run``), so open tasks in the
thread that drives the work and advance them from anywhere (``Step`` is thread-safe enough for
counting: the ticker only reads it).
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, TextIO, TypeVar

T = TypeVar("T")

INTERVAL = 30.0
"""Seconds of silence after which a plain-line reporter says where the work is."""
INTERVAL_ENV = "HATCH_SHRINKRAY_PROGRESS_INTERVAL"
"""Overrides ``INTERVAL`` (seconds, above 0): for tests, and for CI logs that want more or fewer lines."""


def default_interval() -> float:
    """``INTERVAL``, or the environment's value when it is a number above 0."""
    try:
        value = float(os.environ.get(INTERVAL_ENV, ""))
    except ValueError:
        return INTERVAL
    return value if 0 < value < float("inf") else INTERVAL


@dataclass
class Task:
    label: str
    total: int | None
    started: float
    done: int = 0
    detail: str = ""

    def status(self, now: float) -> str:
        """``auto: sensitivity 12/40 (30%), 41 s so far, about 96 s left``."""
        text = self.label
        if self.total:
            text += f" {self.done}/{self.total} ({100 * self.done // max(self.total, 1)}%)"
        elif self.done:
            text += f" {self.done}"
        if self.detail:
            text += f" {self.detail}"
        spent = now - self.started
        text += f", {_seconds(spent)} so far"
        if self.total and 0 < self.done < self.total:
            text += f", about {_seconds(spent / self.done * (self.total - self.done))} left"
        return text


def _seconds(s: float) -> str:
    return f"{s:.0f} s" if s < 120 else f"{s / 60:.1f} min"


class Reporter:
    """Plain lines through ``sink`` (the hook: hatch's ``display_info``; the CLI: stderr), repeated by a
    ticker thread while a task runs silently for ``interval`` seconds."""

    def __init__(self, sink: Callable[[str], None], *, prefix: str = "", interval: float | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.sink = sink
        self.prefix = prefix
        self.interval = default_interval() if interval is None else interval
        self.clock = clock
        self.tasks: list[Task] = []
        self.lock = threading.Lock()
        self.last = clock()
        self.stop = threading.Event()
        self.ticker: threading.Thread | None = None

    def begin(self, task: Task) -> None:
        with self.lock:
            self.tasks.append(task)
            self._start_ticker()

    def _start_ticker(self) -> None:
        if self.ticker is None:
            self.ticker = threading.Thread(target=self._tick, name="shrinkray-progress", daemon=True)
            self.ticker.start()

    def ticking(self) -> bool:
        """Whether the ticker speaks now (a live display speaks for itself)."""
        return True

    def suspend(self) -> None:
        """Another program writes to our stream for a while (see ``external``)."""

    def resume(self) -> None:
        """It is done."""

    def end(self, task: Task) -> None:
        with self.lock:
            if task in self.tasks:
                self.tasks.remove(task)

    def changed(self, task: Task) -> None:
        """A task advanced: plain lines only speak on the ticker's schedule."""

    def say(self, line: str) -> None:
        with self.lock:
            self.last = self.clock()
        self.sink(f"{self.prefix}{line}")

    def _tick(self) -> None:
        while not self.stop.wait(min(self.interval / 4, 1.0)):
            with self.lock:
                if not self.tasks or not self.ticking() or self.clock() - self.last < self.interval:
                    continue
                text = " > ".join(t.status(self.clock()) for t in self.tasks)
                self.last = self.clock()
            self.sink(f"{self.prefix}{text}")

    def close(self) -> None:
        self.stop.set()
        if self.ticker is not None:
            self.ticker.join(timeout=2)


class LiveReporter(Reporter):
    """A terminal: rich's live progress bars on stderr (hatch itself uses rich), cleared when done."""

    def __init__(self, stream: TextIO, *, prefix: str = "") -> None:
        super().__init__(lambda line: print(line, file=stream, flush=True), prefix=prefix)
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self.console = Console(file=stream)
        # rich would send what we print to stdout through the display, on stderr: only when stdout is
        # the terminal too (`shrink ... > report.txt` must still fill the file).
        self.bars = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                             TimeElapsedColumn(), TimeRemainingColumn(), console=self.console, transient=True,
                             redirect_stdout=_isatty(sys.stdout))
        self.ids: dict[int, Any] = {}
        self.suspended = 0
        self.bars.start()

    def ticking(self) -> bool:
        return self.suspended > 0

    def suspend(self) -> None:
        with self.lock:
            self.suspended += 1
            if self.suspended == 1:
                self.bars.stop()
                self.last = self.clock()
                self._start_ticker()

    def resume(self) -> None:
        with self.lock:
            self.suspended -= 1
            if self.suspended == 0:
                self.bars.start()

    def begin(self, task: Task) -> None:
        with self.lock:
            self.tasks.append(task)
            self.ids[id(task)] = self.bars.add_task(f"{self.prefix}{task.label}", total=task.total)

    def end(self, task: Task) -> None:
        with self.lock:
            if task in self.tasks:
                self.tasks.remove(task)
            key = self.ids.pop(id(task), None)
        if key is not None:
            self.bars.remove_task(key)

    def changed(self, task: Task) -> None:
        key = self.ids.get(id(task))
        if key is not None:
            self.bars.update(key, completed=task.done, total=task.total,
                             description=f"{self.prefix}{task.label} {task.detail}".rstrip())

    def say(self, line: str) -> None:
        self.console.print(f"{self.prefix}{line}", markup=False, highlight=False)

    def close(self) -> None:
        super().close()
        self.bars.stop()


_current: ContextVar[Reporter | None] = ContextVar("shrinkray_progress", default=None)


@contextlib.contextmanager
def reporting(reporter: Reporter | None) -> Iterator[Reporter | None]:
    """Make ``reporter`` receive every task opened in this context (None: quiet)."""
    token = _current.set(reporter)
    try:
        yield reporter
    finally:
        _current.reset(token)
        if reporter is not None:
            reporter.close()


def _isatty(stream: TextIO | None) -> bool:
    try:
        return stream is not None and stream.isatty()
    except (AttributeError, ValueError):  # replaced or closed
        return False


def active() -> Reporter | None:
    """The reporter tasks opened here go to (None: quiet, or none installed)."""
    return _current.get()


@contextlib.contextmanager
def external() -> Iterator[None]:
    """Another program writes to the terminal meanwhile (the user's command): a live display steps
    aside for plain lines, which interleave with the program's own output instead of garbling it."""
    reporter = _current.get()
    if reporter is None:
        yield
        return
    reporter.suspend()
    try:
        yield
    finally:
        reporter.resume()


def for_stream(stream: TextIO, *, quiet: bool, prefix: str = "") -> Reporter | None:
    """The reporter a command writing to ``stream`` gets: live on a terminal (when rich is installed),
    plain lines otherwise, none with ``quiet``."""
    if quiet:
        return None
    if stream.isatty():
        with contextlib.suppress(ImportError):
            return LiveReporter(stream, prefix=prefix)
    return Reporter(lambda line: print(line, file=stream, flush=True), prefix=prefix)


@dataclass
class Step:
    """An open task: count what is done, say what it does now."""
    task: Task
    reporter: Reporter | None
    clock: Callable[[], float] = field(default=time.monotonic)

    def advance(self, n: int = 1, detail: str | None = None) -> None:
        self.task.done += n
        if detail is not None:
            self.task.detail = detail
        if self.reporter is not None:
            self.reporter.changed(self.task)

    def total(self, total: int | None) -> None:
        self.task.total = total
        if self.reporter is not None:
            self.reporter.changed(self.task)

    def at(self, done: int, detail: str | None = None) -> None:
        """``done`` steps are done (a loop that skips ahead with ``continue`` sets it at the top)."""
        self.advance(done - self.task.done, detail)

    def show(self, detail: str) -> None:
        """Say what the step does now, without counting (``verifying``)."""
        self.advance(0, detail)


@contextlib.contextmanager
def task(label: str, total: int | None = None) -> Iterator[Step]:
    """A step of long work, reported by the current reporter (if any)."""
    reporter = _current.get()
    clock = reporter.clock if reporter is not None else time.monotonic
    t = Task(label, total, clock())
    if reporter is not None:
        reporter.begin(t)
    try:
        yield Step(t, reporter, clock)
    finally:
        if reporter is not None:
            reporter.end(t)


def tracked(items: Iterable[T], label: str, total: int | None = None,
            detail: Callable[[T], str] | None = None) -> Iterator[T]:
    """``items``, one step of task ``label`` each (``total``: ``len(items)`` when it has one;
    ``detail``: what to show while an item is worked on). The task ends with the loop (a loop left
    by ``break`` or an exception: when the generator is closed or collected)."""
    if total is None and hasattr(items, "__len__"):
        total = len(items)  # type: ignore[arg-type]
    with task(label, total) as step:
        for item in items:
            if detail is not None:
                step.show(detail(item))
            yield item
            step.advance()


def say(line: str) -> None:
    """One line through the current reporter (nothing without one)."""
    reporter = _current.get()
    if reporter is not None:
        reporter.say(line)
