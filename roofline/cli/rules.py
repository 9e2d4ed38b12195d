"""``roofline rules MODEL --gpu GPU``: every rule of thumb for one model on one cluster
(:func:`roofline.parallel.rules.rules_for`), each with the chapter that derives it and, where the package's
full model answers the same question, that answer and why the two part; for a chip with a calibrated cluster
roof (:func:`roofline.core.calibration.get_roof`), each rate-bound rule's value under the measured rates too."""

from __future__ import annotations

import json

from roofline.cli.parser import at, layout_flags
from roofline.core.calibration import get_roof, roof_kind
from roofline.core.hardware import get_hardware, require_links
from roofline.core.model import load_model
from roofline.parallel.rules import RuleResult, default_tp, rules_for
from roofline.present.tables import rule_cell

__all__ = ["run_rules", "FLAGS"]

FLAGS = {"nodes": "--nodes", "gpus_per_node": "--gpus-per-node", "seq": "--seq", "global_batch": "--global-batch",
         "batch": "--batch", "tp": "--tp", "context": "--seq", "tokens": "--seq"}
"""The package's argument names and the flags that carry them, to name the flag at fault."""


def run_rules(args) -> str:
    """``roofline rules MODEL --gpu GPU [--nodes N --gpus-per-node G --seq S --global-batch B --batch B --tp T]``."""
    m, h = at("model", load_model, args.model), at("--gpu", get_hardware, args.gpu, args.catalog)
    gpus = args.nodes * args.gpus_per_node
    at("--gpu", h.peak_flops, "bf16")  # the rules price bf16 work
    # the tensor-parallel rules price NVLink, and a cluster of nodes the network
    at("--catalog" if args.catalog else "--gpu", require_links, h, ["scale_up"] + (["network"] if args.nodes > 1 else []),
       f"rules over {args.nodes:,} node{'s' if args.nodes > 1 else ''} of {args.gpus_per_node} GPUs")
    roof = get_roof(h) if roof_kind(h) == "calibrated" else None
    out = at(layout_flags(FLAGS, m, args.seq), rules_for, m, h, nodes=args.nodes, gpus_per_node=args.gpus_per_node,
                    seq=args.seq, global_batch=args.global_batch, batch=args.batch, tp=args.tp, roof=roof)
    if args.json:
        return json.dumps({"command": "rules", "model": m.name, "gpu": h.key, "nodes": args.nodes,
                           "gpus_per_node": args.gpus_per_node, "seq": args.seq, "global_batch": args.global_batch,
                           "batch": args.batch, "tp": args.tp or default_tp(m, args.gpus_per_node), "rules": [_record(r) for r in out]}, indent=2)
    lines = [f"rules of thumb for {m.title} on {gpus:,} {h.short}{'s' if gpus > 1 else ''} "
             f"({args.nodes:,} node{'s' if args.nodes > 1 else ''} of {args.gpus_per_node}), sequence {args.seq:,}"
             + (f", {args.global_batch:,} sequences a step" if args.global_batch is not None else "")
             + f", decode batch {args.batch}"
             + (f"; \"measured\": the rule under the {roof.label} roof (appendix C)" if roof is not None else
                f"; no calibrated roof for the {h.short}, datasheet rates only") + ":"]
    for r in out:
        lines.append(f"- {r.name} (chapter {r.chapter}): {_shown(r.value, r.unit)}   [{r.statement}]")
        lines.append(f"    assumes {r.assumption}")
        if r.calibrated is not None:
            lines.append(f"    measured rates: {_shown(r.calibrated, r.unit)}")
        if r.model_value is not None:
            lines.append(f"    full model: {_shown(r.model_value, r.model_unit)}, {r.model_label}")
        if r.reason:
            lines.append(f"    {r.reason}")
    return "\n".join(lines)


def _shown(value, unit: str) -> str:
    return f"{rule_cell(value)} {unit}".rstrip()


def _record(r: RuleResult) -> dict:
    return {"name": r.name, "value": r.value, "unit": r.unit, "chapter": r.chapter, "statement": r.statement,
            "assumption": r.assumption, "model_value": r.model_value, "model_unit": r.model_unit or None,
            "model_label": r.model_label or None, "reason": r.reason or None, "calibrated": r.calibrated,
            "calibrated_label": r.calibrated_label or None}
