"""The GPU check's plumbing: every step timed against one budget and skipped, with the reason
recorded, when what is left would not cover its estimate; commands run in their own process
group inside the budget; the report in --out rewritten after each step."""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from scripts.gpucheck.report import write_report

REPO = Path(__file__).resolve().parents[2]
RESERVE_S = 15  # kept back for the last report write
LOG_BYTES = 4 << 20  # of a build's output kept in --out (the device returns files up to 16 MiB)


class StepRunner:
    """Steps timed against one budget, commands run inside it, and the report rewritten after
    each step."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.deadline: float = time.monotonic() + float(args.budget_s)
        self.work: Path = args.work.resolve()
        self.site = self.work / "site"
        self.report: dict[str, Any] = {
            "started": datetime.now(UTC).isoformat(timespec="seconds"),
            "steps": [],
        }

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def save(self) -> None:
        write_report(self.args.out, self.report)

    def step(self, name: str, estimate_s: float, fn: Callable[[], str | None]) -> bool:
        """Run fn unless its estimate overruns the budget; record the outcome. True if it ran OK."""
        entry: dict[str, Any] = {"name": name, "estimate_s": round(estimate_s)}
        if estimate_s > self.left() - RESERVE_S:
            entry.update(
                status="skipped", note=f"needs ~{estimate_s:.0f} s, {self.left():.0f} s left"
            )
        else:
            print(f"== {name} (~{estimate_s:.0f} s, {self.left():.0f} s left)", flush=True)
            started = time.monotonic()
            try:
                entry.update(status="ok", note=fn() or "")
            except Exception as exc:  # a failed step is a finding; the next ones may still run
                entry.update(status="failed", note=f"{type(exc).__name__}: {exc}"[-1500:])
            entry["seconds"] = round(time.monotonic() - started, 1)
        print(f"   {entry['status']}: {entry.get('note', '')}"[:400], flush=True)
        self.report["steps"].append(entry)
        self.save()
        return bool(entry["status"] == "ok")

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        paths = [str(self.site), str(REPO)]
        if env.get("PYTHONPATH"):
            paths.append(env["PYTHONPATH"])
        env["PYTHONPATH"] = os.pathsep.join(paths)
        env["PYTHONUNBUFFERED"] = "1"
        return env

    def run(
        self, cmd: list[str], timeout: float, *, log: str | None = None, **kw: Any
    ) -> subprocess.CompletedProcess[str]:
        """Run cmd within the budget; raise with its output's tail unless it exits 0. `log`
        names a file in --out that gets the output's last LOG_BYTES, whatever happens."""
        timeout = max(1.0, min(timeout, self.left() - RESERVE_S))
        env = kw.pop("env", None) or self.env()
        # Its own process group, so a timeout also stops what it started (pip's cmake, ninja and
        # nvcc would otherwise compile on beside the next steps).
        with subprocess.Popen(
            cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            process_group=0, **kw,
        ) as child:  # fmt: skip
            try:
                out, err = child.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(child.pid, signal.SIGKILL)
                out, err = child.communicate()
                if log is not None:
                    self.keep_log(log, out + err)
                raise RuntimeError(f"{cmd[0]} ran out of time after {timeout:.0f} s") from None
        if log is not None:
            self.keep_log(log, out + err)
        if child.returncode != 0:
            raise RuntimeError(f"{cmd[0]} exit {child.returncode}: {(out + err)[-1200:]}")
        return subprocess.CompletedProcess(cmd, child.returncode, out, err)

    def keep_log(self, name: str, text: str) -> None:
        self.args.out.mkdir(parents=True, exist_ok=True)
        (self.args.out / name).write_text(text[-LOG_BYTES:], encoding="utf-8")

    def python(self, args: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
        return self.run([sys.executable, *args], timeout, cwd=REPO)
