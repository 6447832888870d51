"""Device check for the GPU collector, the one script to run on a machine with a real NVIDIA GPU (<= 10 min).

    .venv/bin/python benchmarks/gpu_device_check.py [--load-seconds 60] [--report docs/nvml-<gpu>.md]
    .venv/bin/python benchmarks/gpu_device_check.py --fake 8      # the same on simulated H200s (no GPU)

Prints a Markdown report (also written to `--report`): the machine and its resident memory, every NVML call
the collector uses (support, p50 cost), memory next to nvidia-smi's, what reads cost and whether they
overlap, and the exporter under a load. Exits 0, also where NVML is unavailable (it says why). What each
part measures: docs/gpu-collector.md, "When a real GPU is at hand".
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import importlib.util
import os
import platform
import shutil
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pynvml
from prometheus_client.parser import text_string_to_metric_families

from benchmarks.scrape_client import Scraper, Summary, free_port, rss_bytes, start, stop
from exporter.errors import SourceError
from exporter.sources.nvml_source import VIOLATION_POLICIES, Nvml, NvmlSource
from simulator.fake_nvml import FakeNvml
from simulator.nvml_costs import H200_COSTS

MIB = 2**20
REPEAT = 20
LOAD = """
import sys, time, torch
end = time.time() + float(sys.argv[1])
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
while time.time() < end:
    (a @ a).sum().item()
"""


class Report:
    """Lines printed as they come and kept for `--report`."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def __call__(self, line: str = "") -> None:
        print(line, flush=True)
        self.lines.append(line)


def rss_mib() -> float:
    """This process's resident memory."""
    return rss_bytes(os.getpid()) / MIB


def fake_nvml(gpus: int) -> FakeNvml:
    """Simulated H200s on the real clock, with the measured call costs, busy."""
    nvml = FakeNvml(gpu_count=gpus, clock=time.monotonic, costs=H200_COSTS)
    for i in range(gpus):
        nvml.set_load(
            i,
            utilization=0.9,
            memory_bandwidth=0.5,
            sm_active=0.8,
            tensor_active=0.6,
            memory_used_bytes=(40 + i) << 30,
        )
    return nvml


def p50_ms(fn: Callable[[], Any], repeat: int = REPEAT) -> tuple[str, float | None]:
    """("ok" or the error name, p50 milliseconds of `repeat` calls)."""
    times = []
    for _ in range(repeat):
        start_time = time.perf_counter()
        try:
            fn()
        except pynvml.NVMLError as exc:
            return type(exc).__name__.removeprefix("NVMLError_"), None
        times.append(time.perf_counter() - start_time)
    return "ok", statistics.median(times) * 1000


def row(name: str, support: str, ms: float | None) -> str:
    """One line of the call table."""
    return f"| {name} | {support} | {'-' if ms is None else f'{ms:.3f}'} |"


FIELDS = (
    "NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
    "NVML_FI_DEV_PCIE_REPLAY_COUNTER",
    "NVML_FI_DEV_MEMORY_TEMP",
    "NVML_FI_DEV_POWER_INSTANT",
    "NVML_FI_DEV_POWER_CURRENT_LIMIT",
    "NVML_FI_DEV_ECC_SBE_VOL_TOTAL",
    "NVML_FI_DEV_ECC_DBE_VOL_TOTAL",
    "NVML_FI_DEV_REMAPPED_COR",
    "NVML_FI_DEV_REMAPPED_UNC",
    "NVML_FI_DEV_REMAPPED_PENDING",
    "NVML_FI_DEV_REMAPPED_FAILURE",
    "NVML_FI_DEV_RETIRED_SBE",
    "NVML_FI_DEV_RETIRED_DBE",
    "NVML_FI_DEV_RETIRED_PENDING",
    "NVML_FI_DEV_NVLINK_LINK_COUNT",
    "NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX",
    "NVML_FI_DEV_NVLINK_ERROR_DL_CRC",
    "NVML_FI_DEV_NVLINK_ERROR_DL_REPLAY",
    "NVML_FI_DEV_NVLINK_ERROR_DL_RECOVERY",
)


def device_calls(nvml: Nvml, handle: Any) -> list[tuple[str, Callable[[], Any]]]:
    """(name, call) for every NVML call and field the collector makes on a GPU."""
    calls: list[tuple[str, Callable[[], Any]]] = [
        ("nvmlDeviceGetSamples (GPU util)", lambda: _samples(nvml, handle)),
        ("nvmlDeviceGetMemoryInfo v1", lambda: nvml.nvmlDeviceGetMemoryInfo(handle)),
        ("nvmlDeviceGetMemoryInfo_v2", lambda: nvml.nvmlDeviceGetMemoryInfo(handle, nvml.nvmlMemory_v2)),
        ("nvmlDeviceGetTemperature", lambda: nvml.nvmlDeviceGetTemperature(handle, 0)),
        ("nvmlDeviceGetClockInfo(SM)", lambda: nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM)),
        ("nvmlDeviceGetClockInfo(MEM)", lambda: nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_MEM)),
        ("nvmlDeviceGetCurrPcieLinkWidth", lambda: nvml.nvmlDeviceGetCurrPcieLinkWidth(handle)),
        (
            "nvmlDeviceGetCurrentClocksEventReasons",
            lambda: nvml.nvmlDeviceGetCurrentClocksEventReasons(handle),
        ),
        ("nvmlDeviceGetRemappedRows", lambda: nvml.nvmlDeviceGetRemappedRows(handle)),
        ("nvmlDeviceGetMigMode", lambda: nvml.nvmlDeviceGetMigMode(handle)),
        ("nvmlDeviceGetPowerUsage", lambda: nvml.nvmlDeviceGetPowerUsage(handle)),
        ("nvmlDeviceGetPcieThroughput(TX)", lambda: nvml.nvmlDeviceGetPcieThroughput(handle, 0)),
        ("nvmlDeviceGetPcieThroughput(RX)", lambda: nvml.nvmlDeviceGetPcieThroughput(handle, 1)),
    ]
    for name, policy in VIOLATION_POLICIES:

        def violation(p: int = policy) -> Any:
            return nvml.nvmlDeviceGetViolationStatus(handle, p)

        calls.append((f"nvmlDeviceGetViolationStatus({name})", violation))
    for constant in FIELDS:

        def read_field(field_id: int = getattr(nvml, constant)) -> None:
            value = nvml.nvmlDeviceGetFieldValues(handle, [(field_id, 0)])[0]
            if value.nvmlReturn != 0:
                raise nvml.NVMLError(value.nvmlReturn)

        calls.append((f"field {constant.removeprefix('NVML_FI_DEV_')}", read_field))
    if hasattr(nvml, "nvmlGpmQueryDeviceSupport"):
        calls.append(("nvmlGpmSampleGet", lambda: _gpm_sample(nvml, handle)))
    return calls


def call_table(nvml: Nvml, handle: Any, say: Report) -> None:
    """Support and p50 cost of every call and field the collector makes."""
    say("| call | support | ms (p50) |")
    say("|---|---|---|")
    for name, fn in device_calls(nvml, handle):
        say(row(name, *p50_ms(fn, 5 if "Throughput" in name or "Gpm" in name else REPEAT)))


def _samples(nvml: Nvml, handle: Any) -> Any:
    with contextlib.suppress(nvml.NVMLError_NotFound):
        return nvml.nvmlDeviceGetSamples(handle, nvml.NVML_GPU_UTILIZATION_SAMPLES, 0)
    return None


def _gpm_sample(nvml: Nvml, handle: Any) -> None:
    sample = nvml.nvmlGpmSampleAlloc()
    try:
        nvml.nvmlGpmSampleGet(handle, sample)
    finally:
        nvml.nvmlGpmSampleFree(sample)


SMI_FIELDS = (
    "index,utilization.gpu,memory.used,memory.reserved,power.draw,clocks.sm,temperature.gpu",
    "index,utilization.gpu,memory.used,power.draw,clocks.sm,temperature.gpu",
)


def nvidia_smi() -> dict[int, dict[str, str]]:
    """nvidia-smi's view per GPU index ({} without nvidia-smi)."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return {}
    for fields in SMI_FIELDS:
        result = subprocess.run(
            [exe, f"--query-gpu={fields}", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        if result.returncode == 0:
            names = fields.split(",")
            rows = [
                dict(zip(names, (v.strip() for v in line.split(",")), strict=False))
                for line in result.stdout.splitlines()
            ]
            return {int(r["index"]): r for r in rows if r.get("index", "").isdigit()}
    return {}


def memory_table(nvml: Nvml, count: int, say: Report) -> None:
    """v1 used, v2 used and reserved per GPU, next to nvidia-smi."""
    smi = nvidia_smi()
    say("| GPU | v1 used MiB | v2 used MiB | v2 reserved MiB | nvidia-smi used | nvidia-smi reserved |")
    say("|---|---|---|---|---|---|")
    for i in range(count):
        handle = nvml.nvmlDeviceGetHandleByIndex(i)
        v1 = nvml.nvmlDeviceGetMemoryInfo(handle)
        try:
            v2 = nvml.nvmlDeviceGetMemoryInfo(handle, nvml.nvmlMemory_v2)
            v2_used, v2_reserved = f"{v2.used / MIB:.0f}", f"{v2.reserved / MIB:.0f}"
        except nvml.NVMLError as exc:
            v2_used = v2_reserved = type(exc).__name__.removeprefix("NVMLError_")
        theirs = smi.get(i, {})
        say(
            f"| {i} | {v1.used / MIB:.0f} | {v2_used} | {v2_reserved} | {theirs.get('memory.used', '-')} | "
            f"{theirs.get('memory.reserved', '-')} |"
        )


def read_costs(source: NvmlSource, count: int, say: Report) -> None:
    """Fast and slow reads of GPU 0, then every GPU serially and in parallel."""
    source.read_gpu(0)
    fast = statistics.median(_timed(lambda: source.read_gpu(0, slow=False)) for _ in range(REPEAT))
    slow = statistics.median(_timed(lambda: source.read_gpu(0, slow=True)) for _ in range(5))
    say(f"- one GPU: fast read p50 {fast:.2f} ms, slow read p50 {slow:.2f} ms")

    def parallel() -> None:
        threads = [threading.Thread(target=source.read_gpu, args=(i, False)) for i in range(count)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    serial = statistics.median(
        _timed(lambda: [source.read_gpu(i, slow=False) for i in range(count)]) for _ in range(5)
    )
    together = statistics.median(_timed(parallel) for _ in range(5))
    if count == 1:
        verdict = "one GPU: overlap not measurable"
    else:
        verdict = (
            "the driver overlaps reads of different GPUs" if serial / together > 1.5 else "no overlap seen"
        )
    say(
        f"- all {count} GPUs, fast reads: one after the other p50 {serial:.2f} ms, one thread each "
        f"p50 {together:.2f} ms (x{serial / together:.1f}: {verdict})"
    )


def _timed(fn: Callable[[], Any]) -> float:
    start_time = time.perf_counter()
    fn()
    return (time.perf_counter() - start_time) * 1000


@contextlib.contextmanager
def load(seconds: float, gpus: int, command: str | None, fake: bool, say: Report) -> Iterator[None]:
    """A load on every GPU for `seconds` (torch bf16 matmul, or `command`), if one can be had."""
    procs: list[subprocess.Popen[bytes]] = []
    if command:
        procs.append(subprocess.Popen(command, shell=True))
        say(f"- load: `{command}`")
    elif fake:
        say("- load: the simulated GPUs run the simulated workload")
    elif importlib.util.find_spec("torch") is not None:
        for i in range(gpus):
            env = {**os.environ, "CUDA_VISIBLE_DEVICES": str(i)}
            procs.append(subprocess.Popen([sys.executable, "-c", LOAD, str(seconds)], env=env))
        say(f"- load: bf16 8192x8192 matmul on each of the {gpus} GPUs (torch)")
    else:
        say("- load: none (torch does not import and no --load-cmd): the exporter is measured idle")
    try:
        yield
    finally:
        for proc in procs:
            proc.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(10)


def metric(body: bytes, name: str) -> dict[str, float]:
    """Samples of `name` by gpu label ("" for unlabelled ones)."""
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(body.decode()):
        for sample in family.samples:
            if sample.name == name:
                out[sample.labels.get("gpu", "")] = sample.value
    return out


def exporter_under_load(args: argparse.Namespace, gpus: int, say: Report) -> None:
    """Start the exporter, load the GPUs, scrape, compare with nvidia-smi."""
    port = free_port()
    argv = [sys.executable, "-m", "ibpool", "exporter", "--no-collector.infiniband", "--no-collector.jobs"]
    argv += ["--web.listen-address", f"127.0.0.1:{port}", "--log.level", "warning"]
    if args.fake:
        argv += ["--simulate", "--simulate.gpus", str(gpus), "--simulate.nvml-costs", "h200"]
    proc = start(argv, port, timeout=60)
    try:
        scraper = Scraper(port)
        with load(args.load_seconds, gpus, args.load_cmd, bool(args.fake), say):
            time.sleep(min(10.0, args.load_seconds / 4))  # the load ramps up
            first, began = scraper.scrape()[1], time.monotonic()
            times: list[float] = []
            comparisons: list[str] = []
            end, next_compare = began + args.load_seconds * 0.7, began
            body = first
            while time.monotonic() < end:
                seconds, body = scraper.scrape()
                times.append(seconds)
                if time.monotonic() >= next_compare:
                    comparisons.append(_compare(body))
                    next_compare += max(2.0, args.load_seconds / 8)
                time.sleep(0.05)
            elapsed = time.monotonic() - began
        read = sum(metric(body, "ibpool_gpu_nvml_read_seconds_total").values())
        read0 = sum(metric(first, "ibpool_gpu_nvml_read_seconds_total").values())
        stale = [gpu for gpu, value in metric(body, "ibpool_gpu_sample_stale").items() if value]
        say(f"- `/metrics` over HTTP, {len(times)} scrapes 50 ms apart: {Summary.of(times)}")
        say(f"- NVML read time: {(read - read0) / elapsed * 1000:.1f} ms per second for {gpus} GPUs")
        say(f"- exporter resident memory: {rss_bytes(proc.pid) / MIB:.1f} MiB; stale GPUs: {stale or 'none'}")
        say("- exporter (ours) against nvidia-smi (smi): utilization, memory used MiB, power W, SM MHz")
        for line in comparisons:
            say(f"  - {line}")
    finally:
        stop(proc)


def _compare(body: bytes) -> str:
    smi = nvidia_smi()
    util = metric(body, "ibpool_gpu_utilization_ratio")
    used = metric(body, "ibpool_gpu_memory_used_bytes")
    power = metric(body, "ibpool_gpu_power_watts")
    clock = metric(body, "ibpool_gpu_sm_clock_hertz")
    nan = float("nan")
    parts = []
    for gpu in sorted(used, key=int)[:4]:
        ours = (
            f"ours {util.get(gpu, nan):.3f} {used[gpu] / MIB:.0f} {power.get(gpu, nan):.0f} "
            f"{clock.get(gpu, nan) / 1e6:.0f}"
        )
        theirs = smi.get(int(gpu))
        if theirs is not None:
            ours += (
                f" / smi {theirs.get('utilization.gpu')}% {theirs.get('memory.used')} "
                f"{theirs.get('power.draw')} {theirs.get('clocks.sm')}"
            )
        parts.append(f"GPU {gpu}: {ours}")
    return "; ".join(parts)


def machine(nvml: Nvml, source: NvmlSource, after_import: float, say: Report) -> int:
    """Open NVML, read every GPU once, say what the machine is and what memory that took."""
    source.open()
    after_init = rss_mib()
    count = source.device_count
    for i in range(count):
        source.read_gpu(i)
    names = {str(nvml.nvmlDeviceGetName(nvml.nvmlDeviceGetHandleByIndex(i))) for i in range(count)}
    try:
        bindings = importlib.metadata.version("nvidia-ml-py")
    except importlib.metadata.PackageNotFoundError:
        bindings = "?"
    say("## Machine")
    say(f"- {count} GPU(s): {', '.join(sorted(names))}; driver {nvml.nvmlSystemGetDriverVersion()}")
    say(f"- nvidia-ml-py {bindings}; Python {platform.python_version()}")
    say(
        f"- resident memory of this process: {after_import:.1f} MiB after imports, {after_init:.1f} MiB "
        f"after nvmlInit, {rss_mib():.1f} MiB after reading every GPU once"
    )
    return count


def main(argv: list[str] | None = None) -> int:
    """Run every check; 0 unless the check itself breaks."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--fake", type=int, metavar="N", help="N simulated H200s instead of NVML")
    parser.add_argument("--load-seconds", type=float, default=60.0, help="how long the exporter is loaded")
    parser.add_argument("--load-cmd", help="a shell command that loads the GPUs (instead of torch)")
    parser.add_argument("--report", type=Path, help="also write the report to this Markdown file")
    args = parser.parse_args(argv)
    say = Report()
    began = time.monotonic()
    say(f"# GPU device check ({time.strftime('%Y-%m-%d')}{', simulated' if args.fake else ''})")
    say()
    after_import = rss_mib()
    nvml: Nvml = fake_nvml(args.fake) if args.fake else pynvml
    source = NvmlSource(nvml)
    try:
        count = machine(nvml, source, after_import, say)
    except SourceError as exc:
        say(f"{exc}; nothing to check on this machine")
        return 0
    try:
        say()
        say("## NVML calls the collector makes (GPU 0)")
        call_table(nvml, nvml.nvmlDeviceGetHandleByIndex(0), say)
        say()
        say("## Memory: v1, v2 and the reserve")
        memory_table(nvml, count, say)
        say()
        say("## Read costs")
        read_costs(source, count, say)
        say(f"- NVML errors counted: {source.errors.snapshot() or 'none'}")
    finally:
        source.close()
    say()
    say("## The exporter under a load")
    exporter_under_load(args, count, say)
    say()
    say(f"(check took {time.monotonic() - began:.0f} s)")
    if args.report is not None:
        args.report.write_text("\n".join(say.lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
