"""``roofline hardware``, ``roofline params`` and ``roofline ridge``: the catalogs, read out."""

from __future__ import annotations

import json

from roofline.cli.parser import at
from roofline.core.hardware import Hardware, get_hardware, hardware_names
from roofline.core.model import Model, load_model
from roofline.core.units import fmt
from roofline.present.tables import Table
from roofline.workloads.memory import kv_bytes_per_new_token

__all__ = ["run_hardware", "run_params", "run_ridge"]


def run_hardware(args) -> str:
    """``roofline hardware [NAME]``: the catalog, one line per accelerator, or every figure of one entry."""
    if args.name is None:
        return _hardware_list(args.json, args.catalog)
    return _hardware_one(at("name", get_hardware, args.name, args.catalog), args.json)


def run_params(args) -> str:
    """``roofline params MODEL``: total and active parameters, the attention layout, the KV cache per token."""
    return _params(at("model", load_model, args.model), args.json)


def run_ridge(args) -> str:
    """``roofline ridge GPU``: the datasheet ridge point in one number format."""
    return at("--dtype", _ridge, at("gpu", get_hardware, args.gpu, args.catalog), args.dtype, args.json)


def _hardware_list(as_json: bool, catalog=None) -> str:
    entries = [get_hardware(k, catalog) for k in hardware_names(catalog)]
    if as_json:
        return json.dumps([{"key": h.key, "name": h.name, "year": h.year, "hbm_bandwidth": h.hbm_bandwidth,
                            "hbm_capacity": h.hbm_capacity, "hbm_usable": h.usable_capacity,
                            "dense_flops": dict(h.dense_flops)} for h in entries], indent=2)
    rows = tuple((h.key, h.name, str(h.year), fmt(h.hbm_bandwidth, "B/s"), fmt(h.hbm_capacity, "B"),
                  fmt(h.usable_capacity, "B"), ", ".join(h.dense_flops)) for h in entries)
    table = Table(("key", "name", "year", "HBM bandwidth", "HBM sold as", "HBM usable", "dense formats"), rows)
    return f"{table!r}\n\n`roofline hardware KEY` shows every figure of one entry with its source."


def _hardware_one(h: Hardware, as_json: bool) -> str:
    if as_json:
        return json.dumps({"key": h.key, "name": h.name, "vendor": h.vendor, "architecture": h.architecture,
                           "year": h.year, "aliases": list(h.aliases), "hbm_usable": h.usable_capacity,
                           "reserve": h.reserve,
                           "figures": {path: {"value": f.value, "unit": f.unit, "given": f.given, "note": f.note,
                                              "source": {"title": f.source.title, "url": f.source.url,
                                                         "date": f.source.date}}
                                       for path, f in h.figures.items()}}, indent=2)
    lines = [f"{h.name} ({h.vendor} {h.architecture}, {h.year}, {h.form_factor}, {h.memory_type})"]
    if h.aliases:
        lines.append(f"aliases: {', '.join(h.aliases)}")
    sources: dict[str, int] = {}
    rows = []
    for path, f in h.figures.items():
        number = sources.setdefault(f.source.key, len(sources) + 1)
        shown = f.given
        if path.startswith("interconnect."):
            link = h.interconnect[path.split(".", 1)[1]]
            shown = f"{f.given} {link.direction} ({link.name})"
        rows.append((path, shown, f"[{number}]", f.note))
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    lines.append("")
    for r in rows:
        lines.append("  ".join(c.ljust(w) for c, w in zip(r[:3], widths)) + ("  " + r[3] if r[3] else ""))
    lines += ["", "sources:"]
    for key, number in sources.items():
        s = next(f.source for f in h.figures.values() if f.source.key == key)
        lines.append(f"  [{number}] {s.title} ({s.date}) {s.url}")
    lines.append("")
    total = "the device's total" if h.hbm_total is not None else "the marketing figure (no device total given)"
    lines.append(f"HBM usable: {fmt(h.usable_capacity, 'B')} = {total} less {fmt(h.reserve, 'B')} kept for the "
                 f"CUDA context and workspaces (sold as {fmt(h.hbm_capacity, 'B')})")
    lines.append("ridge points (dense peak / HBM bandwidth): " + ", ".join(
        f"{d} {h.ridge_point(d):,.0f} FLOP/B" for d in h.dense_flops))
    return "\n".join(lines)


def _params(m: Model, as_json: bool) -> str:
    record = {
        "name": m.name, "family": m.family, "total": m.params, "active": m.active_params,
        "layers": m.num_layers, "hidden_size": m.hidden_size, "kv_bytes_per_token_bf16": m.kv_bytes_per_token("bf16"),
    }
    if m.sliding_layers:
        record["sliding_window"] = m.sliding_window
        record["sliding_layers"] = len(m.sliding_layers)
    if m.moe is not None:
        record["experts"] = m.moe.num_experts
        record["experts_per_token"] = m.moe.experts_per_token
    if as_json:
        return json.dumps(record, indent=2)
    lines = [f"{m.title} ({m.family})",
             f"  total parameters   {m.params:>20,}",
             f"  active per token   {m.active_params:>20,}"]
    if m.moe is not None:
        lines.append(f"  experts            {m.moe.experts_per_token} of {m.moe.num_experts} routed per token"
                     + (" plus shared" if m.moe.shared_intermediate_size else ""))
    if m.mla is not None:
        lines.append(f"  attention          latent (MLA): {m.mla.latent_width} cached numbers per token per layer")
    else:
        lines.append(f"  attention          {m.num_heads} query heads, {m.num_kv_heads} KV heads of {m.head_dim}")
    if m.attention_softcap or m.final_softcap:
        caps = [f"scores at {m.attention_softcap:g}" if m.attention_softcap else "",
                f"final logits at {m.final_softcap:g}" if m.final_softcap else ""]
        lines.append(f"  soft-capping       tanh on {' and '.join(c for c in caps if c)}")
    if m.sliding_layers:
        local = len(m.sliding_layers)
        lines.append(f"  sliding window     {m.sliding_window:,} tokens on {local} of {m.num_layers} layers"
                     + ("" if local == m.num_layers else f" (local), {m.num_layers - local} global"))
    lines.append(f"  KV cache (bf16)    {m.kv_bytes_per_token('bf16'):>20,.0f} bytes per token"
                 + (f" (up to {m.sliding_window:,} tokens;\n                     "
                    f"{kv_bytes_per_new_token(m, m.sliding_window, 'bf16'):,.0f} beyond)"
                    if m.sliding_layers else ""))
    return "\n".join(lines)


def _ridge(h: Hardware, dtype: str, as_json: bool) -> str:
    ridge = h.ridge_point(dtype)
    if as_json:
        return json.dumps({"gpu": h.key, "dtype": dtype, "peak_flops": h.peak_flops(dtype),
                           "hbm_bandwidth": h.hbm_bandwidth, "ridge_point": ridge}, indent=2)
    return (f"{h.name}: dense {dtype} {fmt(h.peak_flops(dtype), 'FLOP/s', 4)} / HBM {fmt(h.hbm_bandwidth, 'B/s')}"
            f" = {ridge:,.1f} FLOP per byte")
