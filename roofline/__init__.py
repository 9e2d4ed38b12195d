"""roofline: the package behind the book. Every number in the prose comes from here.

The vocabulary of chapter 1, importable from the top level::

    import roofline as rl
    h100 = rl.get_hardware("h100-sxm")
    step = rl.decode_step("llama-3-8b", batch=1)
    rl.predict(step, h100).time        # 4.79 ms: the weights stream through HBM once per token
"""

from roofline.core.cost import Breakdown, Cost, arithmetic_intensity
from roofline.core.hardware import Hardware, get_hardware, hardware_names, load_catalog
from roofline.core.formats import Formats, formats
from roofline.workloads.inference import (ACCOUNTINGS, OPTIONS, PARTS, attention_parity_tokens, compute_bound_batch,
                                          decode_step, prefill, verify_step)
from roofline.core.model import Model, NotModelledError, load_model, model_from_config, model_names
from roofline.core.network import bandwidth_tiers, data_parallel_bytes, transfer_time
from roofline.core.ops import Op, attention_flops, kv_cache_bytes, matmul
from roofline.core.roof import (TIMINGS, CalibratedRoof, Prediction, Roof, as_roof, attainable_flops, predict,
                                ridge_point)
from roofline.workloads.training import (MFU_REPORTS, hfu, mfu, model_state_bytes, plan_training,
                                         tokens_per_s_at_mfu, training_flops_per_token, training_step)
from roofline.core.checks import UnknownNameError
from roofline.core.units import Quantity, dtype_bytes, fmt

from roofline.core.cost import difference, gain, nearest, ratio
from roofline.core.network import link_ridge
from roofline.core.roof import time_per_token, tokens_per_s
from roofline.core.hardware import scale_hardware

__version__ = "0.1.0"

__all__ = [
    "ACCOUNTINGS", "Breakdown", "UnknownNameError", "CalibratedRoof", "Formats", "OPTIONS", "Op", "PARTS", "TIMINGS", "Cost", "Hardware", "MFU_REPORTS", "Model", "NotModelledError", "Prediction",
    "Quantity", "Roof",
    "arithmetic_intensity", "as_roof", "attainable_flops", "attention_flops", "attention_parity_tokens",
    "bandwidth_tiers", "compute_bound_batch", "data_parallel_bytes", "decode_step", "dtype_bytes", "fmt", "formats",
    "get_hardware", "hardware_names", "hfu", "kv_cache_bytes", "load_catalog", "load_model", "matmul", "mfu",
    "model_from_config", "model_names", "model_state_bytes", "predict", "prefill", "ridge_point",
    "tokens_per_s_at_mfu", "training_flops_per_token", "transfer_time", "plan_training", "training_step",
    "verify_step",
]
__all__ += ["difference", "gain", "link_ridge", "nearest", "ratio", "scale_hardware", "time_per_token", "tokens_per_s"]
