"""Plant one-line bugs in the cluster and serving models and count the unit tests that catch each one:
``python -m booktools.mutants [serving|training] [--tests PATH ...]``.

Issue 51 asks that a one-line bug planted in any term of the cluster step model or the deployment model fail
at least two unit tests, so that the models are pinned term by term and not only end to end by the development
sets. Each mutant below is one such bug: a file, the exact text of the line as it stands, and what it becomes.
The runner applies one mutant at a time to the working tree, runs the given tests (stopping at the third
failure), puts the line back, and prints how many tests failed; a mutant that two tests do not catch is a term
the tests leave loose. A mutant whose text is no longer in its file is reported as stale, so that the list
follows the code. Nothing here runs in ``make test``: it is a tool to check the tests with.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parent.parent


class Mutant(NamedTuple):
    """One planted bug: in ``path``, the text ``old`` (exactly one occurrence) becomes ``new``."""

    name: str
    path: str
    old: str
    new: str


D = "roofline/serving/deployment.py"
C = "roofline/parallel/cluster.py"

SERVING = (
    Mutant("attention groups' rows", D, "    rows = (decode + prefill) / a  # tokens", "    rows = (decode + prefill)  # tokens"),
    Mutant("all-to-all buffer's top-k", D, "            out = rows / tp * m.moe.experts_per_token * h",
           "            out = rows / tp * h"),
    Mutant("TP all-reduce message", D, "        msg = rows * h * EXCHANGE_BYTES", "        msg = rows * h"),
    Mutant("two all-reduces a layer", D, "        sec = 2 * roof.all_reduce_time(tp, msg,", "        sec = roof.all_reduce_time(tp, msg,"),
    Mutant("KV heads split over TP", D, "        kv_bytes = seqs * context * m.kv_bytes_per_layer(d.kv) / split",
           "        kv_bytes = seqs * context * m.kv_bytes_per_layer(d.kv)"),
    Mutant("memory-bound bytes a token", D, "    per_token = m.norms_per_layer * 4 * h + 12 * h", "    per_token = m.norms_per_layer * 4 * h + 8 * h"),
    Mutant("prefill attention pairs", D, "        f = prefill / a * keys * 2.0 * heads * (dqk + dv)",
           "        f = prefill / a * keys * 4.0 * heads * (dqk + dv)"),
    Mutant("batch cap", D, "        batch = min(batch, d.max_batch)", "        batch = batch"),
    Mutant("shared prefix held once", D, "    prefix = w.cached_tokens * per_tok  # one shared copy",
           "    prefix = 0.0 * per_tok  # one shared copy"),
    Mutant("answer held under grow", D, "    answer = w.output_tokens if policy == \"reserve\" else w.output_tokens / 2.0",
           "    answer = w.output_tokens"),
    Mutant("KV cache sent between pools", D, "    cache = float(m.kv_cache_bytes(w.input_tokens, d.kv))",
           "    cache = float(m.kv_cache_bytes(w.output_tokens, d.kv))"),
    Mutant("KV fraction", D, "    room = max(0.0, (hw.usable_capacity - weights) * d.kv_fraction - prefix)",
           "    room = max(0.0, (hw.usable_capacity - weights) - prefix)"),
    Mutant("attention groups' batch", D, "    batch = int(min(room / per_seq * d.dp_attention, LARGEST_BATCH))",
           "    batch = int(min(room / per_seq, LARGEST_BATCH))"),
)

TRAINING = (
    Mutant("ZeRO-3 gathers twice", C, "            per = 2 * gather(wsize) + scatter(size)",
           "            per = gather(wsize) + scatter(size)"),
    Mutant("ring's backward sends", C, "            ph.add(\"bwd\", \"context-parallel\", max(0.0, 2 * (cp - 1) * send - a_bwd))",
           "            ph.add(\"bwd\", \"context-parallel\", max(0.0, (cp - 1) * send - a_bwd))"),
    Mutant("training all-to-all's copies of a token", C, "    row = tokens * units * m.hidden_size",
           "    row = tokens * m.hidden_size"),
    Mutant("DeepSeek-V3's fp8 dispatch", C,
           "    out = row * (FP8_DISPATCH_BYTES if rec is not None and rec.fp8_dispatch else 2.0)",
           "    out = row * 2.0"),
    Mutant("grouped gate and up shared by two", C,
           "        out[\"expert.gate_proj\"] = out[\"expert.up_proj\"] = up / 2 / local",
           "        out[\"expert.gate_proj\"] = out[\"expert.up_proj\"] = up / local"),
    Mutant("which stage shards gradients", C, "             \"gradients\": (held if kept and mcount > 1 else sharded(2)) * per[\"gradients\"],",
           "             \"gradients\": (held if kept and mcount > 1 else sharded(3)) * per[\"gradients\"],"),
    Mutant("zig-zag divisibility", C, "        if layout.cp_method == \"ring\" and layout.seq % (2 * cp):",
           "        if layout.cp_method == \"ring\" and layout.seq % cp:"),
    Mutant("backward matmuls twice the forward", C, "    ph.add(\"bwd\", \"matmuls\", att + mlp, 2)", "    ph.add(\"bwd\", \"matmuls\", att + mlp, 1)"),
    Mutant("pipeline bubble", C, "    parts[\"bubble\"] = (pp - 1) / v * avg if pp > 1 else 0.0",
           "    parts[\"bubble\"] = (pp - 1) * avg if pp > 1 else 0.0"),
    Mutant("memory-bound backward bytes", C, "    ph.add(\"bwd\", \"memory-bound\", roof.memory_time(2 * per_token * T, 2 * kernels))",
           "    ph.add(\"bwd\", \"memory-bound\", roof.memory_time(per_token * T, 2 * kernels))"),
    Mutant("tied embedding's gradient", C, "        comm += roof.collective_time(\"all_reduce\", 2, m.vocab_size * m.hidden_size / lay.tp * gbytes, per_node=1)",
           "        comm += 0.0"),
    Mutant("selective recomputation's attention FLOPs", C,
           "    return training_flops_per_token(m, recompute=recompute) + forward * (3 if recompute == \"none\" else 4)",
           "    return training_flops_per_token(m, recompute=recompute) + forward * (3 if recompute != \"full\" else 4)"),
    Mutant("the floor's number format", C, "    floor = _price(m, picked, get_roof(hw, \"datasheet\", layout.dtype), {})",
           "    floor = _price(m, picked, get_roof(hw, \"datasheet\"), {})"),
    Mutant("optimizer state sharded from stage 1", C, "    parts[\"optimizer\"] = roof.memory_time(sharded(1) * OPTIMIZER_BYTES[lay.dtype], 10)",
           "    parts[\"optimizer\"] = roof.memory_time(held * OPTIMIZER_BYTES[lay.dtype], 10)"),
)

SETS = {"serving": (SERVING, ("tests/unit/serving", "tests/unit/measured/test_serving.py")),
        "training": (TRAINING, ("tests/unit/parallel", "tests/unit/measured/test_training_runs.py"))}


def caught(mutant: Mutant, tests) -> int | None:
    """How many of ``tests`` fail (counting to three) with ``mutant`` planted; None where its text is stale."""
    path = ROOT / mutant.path
    text = path.read_text()
    if text.count(mutant.old) != 1:
        return None
    try:
        path.write_text(text.replace(mutant.old, mutant.new))
        run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
                              "--maxfail=3", *tests], cwd=ROOT, capture_output=True, text=True)
    finally:
        path.write_text(text)
    found = re.search(r"(\d+) failed", run.stdout)
    return int(found.group(1)) if found else 0


def main(argv: list[str]) -> int:
    names = [a for a in argv if a in SETS] or list(SETS)
    loose = 0
    for name in names:
        mutants, tests = SETS[name]
        print(f"{name}: {len(mutants)} planted bugs, tests {' '.join(tests)}", flush=True)
        for m in mutants:
            n = caught(m, tests)
            shown = "stale: its line is no longer in the file" if n is None else f"{n}{'+' if n >= 3 else ''} tests fail"
            loose += n is None or n < 2
            print(f"  {m.name:<40} {shown}", flush=True)
    print(f"{loose} planted bug{'s' if loose != 1 else ''} caught by fewer than two tests (or stale)")
    return 1 if loose else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
