"""The check's report: one JSON document and its Markdown rendering, rewritten after every step
so that a run cut short still leaves what it measured."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

JSON_NAME = "gpu-check.json"
MD_NAME = "gpu-check.md"
GIB = 1024**3


def _num(value: Any, fmt: str = "{:.2f}") -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "NO"
    if isinstance(value, int | float):
        return fmt.format(value)
    return str(value)


def _gib(value: Any) -> str:
    return "—" if value is None else f"{value / GIB:.2f} GiB"


def render_markdown(report: dict[str, Any]) -> str:
    lines = [f"# GPU check, {report.get('started', '?')}", ""]
    lines.append(f"Mode: {report.get('mode', '?')}.")
    lines += ["", "| machine | |", "| --- | --- |"]
    lines += [f"| {key} | {value} |" for key, value in report.get("machine", {}).items()]
    lines += _summary(report)
    lines += ["", "## Steps", "", "| step | status | seconds | note |", "| --- | --- | --- | --- |"]
    for step in report.get("steps", []):
        note = str(step.get("note", "")).replace("|", "/").replace("\n", " ")[:200]
        lines.append(
            f"| {step['name']} | {step['status']} | {_num(step.get('seconds'), '{:.0f}')} "
            f"| {note} |"
        )
    for size, res in report.get("identity", {}).items():
        lines += _identity_section(size, res)
    for size, res in report.get("bench", {}).items():
        lines += _bench_section(size, res)
    for name, text in report.get("tools", {}).items():
        lines += ["", f"## llama.cpp {name}", "", "```", str(text)[-3000:], "```"]
    return "\n".join(lines) + "\n"


def _summary(report: dict[str, Any]) -> list[str]:
    """The figures a closing note quotes, one line per size."""
    lines: list[str] = []
    for size, res in report.get("identity", {}).items():
        runs = [r for pair in res.get("pairs", []) for r in pair["runs"]]
        bad = {
            mode: sum(1 for r in runs if r["exact"] == mode and not r["identical_to_plain"])
            for mode in (False, True)
        }
        total = {mode: sum(1 for r in runs if r["exact"] == mode) for mode in (False, True)}
        vram = [
            (p["vram_loaded"].get("nvml_used_bytes"), p["vram_loaded"].get("nvidia_smi_used_bytes"))
            for p in res.get("pairs", [])
        ]
        vram_text = ", ".join(f"{_gib(a)} vs {_gib(b)}" for a, b in vram)
        probes = [p["pass_sizes"] for p in res.get("pairs", []) if p.get("pass_sizes")]
        exact_rows = [r for probe in probes for r in probe.get("exact", [])]
        if exact_rows:
            equal = sum(r["bit_equal"] for r in exact_rows)
            total_rows = sum(r["positions"] for r in exact_rows)
            vram_text += f"; exact-mode logits bit-equal across pass sizes {equal}/{total_rows}"
        lines.append(
            f"- {size}: greedy identity with plain decoding: default mode "
            f"{total[False] - bad[False]}/{total[False]}, exact mode "
            f"{total[True] - bad[True]}/{total[True]}; VRAM NVML vs nvidia-smi: {vram_text}"
        )
    for size, res in report.get("bench", {}).items():
        plain = res.get("plain", {})
        configs = res.get("configs", [])
        if not configs:
            continue
        best = max(configs, key=lambda c: c.get("speedup") or 0.0)
        lines.append(
            f"- {size} bench: plain {_num(plain.get('tokens_per_second'), '{:.1f}')} tok/s; "
            f"best {best.get('label')} {_num(best.get('tokens_per_second'), '{:.1f}')} tok/s, "
            f"speedup {_num(best.get('speedup'))} (predicted "
            f"{_num(best.get('predicted_speedup'))})"
        )
    return ["", "## Summary", "", *lines] if lines else []


def _identity_section(size: str, res: dict[str, Any]) -> list[str]:
    lines = ["", f"## Identity, acceptance and VRAM: {size}", ""]
    lines.append(
        "llama_supports_gpu_offload(): "
        f"{_num(res.get('gpu_offload_supported'))} (also true for a CPU build with RPC)"
    )
    for pair in res.get("pairs", []):
        loaded, before = pair["vram_loaded"], pair["vram_before"]
        nvml, smi = loaded.get("nvml_used_bytes"), loaded.get("nvidia_smi_used_bytes")
        grew = (
            None
            if nvml is None or before.get("nvml_used_bytes") is None
            else (nvml - before["nvml_used_bytes"])
        )
        lines += [
            "",
            f"### {Path(pair['draft']).name} drafting for {Path(pair['target']).name}",
            "",
            f"VRAM read by SpecChat (NVML) {_gib(nvml)} vs nvidia-smi {_gib(smi)}; "
            f"grew by {_gib(grew)} on load; llama.cpp reports "
            f"{_gib(pair['model_memory']['total'])} of weights and KV cache; "
            f"load {_num(pair.get('load_s'), '{:.1f}')} s.",
            "",
            *_pass_size_lines(pair.get("pass_sizes")),
            "llama.cpp on load (target, then draft): "
            + ("; ".join(_where(pair.get("load_log", []))) or "—"),
            "",
            "| prompt | exact | γ | tokens | tok/s | acceptance | tokens/round | identical |",
            "| --- | --- | --- | --- | --- | --- | --- | --- |",
        ]
        for run in pair["runs"]:
            gamma = "plain" if run["gamma"] is None else run["gamma"]
            lines.append(
                f"| {run['prompt']} | {_num(run['exact'])} | {gamma} | {run['tokens']} "
                f"| {_num(run['tokens_per_second'], '{:.1f}')} | {_num(run['acceptance_rate'])} "
                f"| {_num(run['tokens_per_round'])} | {_num(run['identical_to_plain'])} |"
            )
    return lines


def _pass_size_lines(probe: dict[str, list[dict[str, Any]]] | None) -> list[str]:
    if not probe:
        return []
    lines = [
        "Logits of the same positions by pass size (exact mode: against 2-row steps; default: "
        "against 1-row steps):",
        "",
        "| mode | rows per pass | bit-equal | same argmax | max abs diff |",
        "| --- | --- | --- | --- | --- |",
    ]
    for mode, rows in probe.items():
        for r in rows:
            n = r["positions"]
            lines.append(
                f"| {mode} | {r['rows_per_pass']} | {r['bit_equal']}/{n} "
                f"| {r['same_argmax']}/{n} | {r['max_abs_diff']:.3g} |"
            )
    return [*lines, ""]


def _where(log: list[str]) -> list[str]:
    # The lines that say where things went: layer counts and each buffer's device.
    keep = [ln for ln in log if "offloaded" in ln or "model buffer" in ln or "KV buffer" in ln]
    return [" ".join(ln.split()) for ln in keep][:12]


def _bench_section(size: str, res: dict[str, Any]) -> list[str]:
    lines = [
        "",
        f"## specchat bench: {size}",
        "",
        "| config | tok/s | speedup | predicted | acceptance | mean γ | identical |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for config in [res.get("plain", {}), *res.get("configs", [])]:
        if not config:
            continue
        lines.append(
            f"| {config.get('label')} | {_num(config.get('tokens_per_second'), '{:.1f}')} "
            f"| {_num(config.get('speedup'))} | {_num(config.get('predicted_speedup'))} "
            f"| {_num(config.get('acceptance_rate'))} | {_num(config.get('mean_gamma'))} "
            f"| {_num(config.get('identical_to_plain'))} |"
        )
    return lines


def write_report(out: Path, report: dict[str, Any]) -> tuple[Path, Path]:
    """Write both files into `out` (created if missing), each via a temporary name."""
    out.mkdir(parents=True, exist_ok=True)
    paths = (out / JSON_NAME, out / MD_NAME)
    texts = (json.dumps(report, indent=2, default=str) + "\n", render_markdown(report))
    for path, text in zip(paths, texts, strict=True):
        partial = path.with_name(path.name + ".partial")
        partial.write_text(text, encoding="utf-8")
        partial.replace(path)
    return paths
