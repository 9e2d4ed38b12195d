"""A transformer's shape, read from a Hugging Face ``config.json`` (chapter 1).

The configs of the book's models ship inside the package (``roofline/data/models``), so nothing is
downloaded; a reader's own ``config.json`` works the same way. From the shape come the exact
parameter count (total and, for a mixture of experts, active), the matmuls of one layer, and the
KV-cache bytes per token.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import NamedTuple

import numpy as np

from roofline.core.checks import number, unknown_name
from roofline.core.ops import attention_flops
from roofline.core.units import dtype_bytes

__all__ = ["MAKERS_TITLES", "Linear", "MoE", "MLA", "Model", "NotModelledError", "load_model", "model_names", "model_from_config", "param_count"]

# model_type values this loader reads. All are decoder-only transformers; most have RMSNorm, rotary
# positions and gated (SwiGLU or GeGLU) MLPs and differ in biases, norms, experts and attention. GPT-2
# and GPT-NeoX have LayerNorm with biases and a plain two-matrix MLP, and GPT-2 learned positions.
_DENSE_FAMILIES = {"llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "gemma3_text", "phi3", "gpt2", "gpt_neox"}
_MOE_FAMILIES = {"mixtral", "qwen2_moe", "qwen3_moe"}
_MLA_FAMILIES = {"deepseek_v2", "deepseek_v3"}
FAMILIES = _DENSE_FAMILIES | _MOE_FAMILIES | _MLA_FAMILIES


MAKERS_TITLES = MappingProxyType({
    "gpt2": "GPT-2",
    "deepseek-v3": "DeepSeek-V3",
    "qwen1.5-moe-a2.7b": "Qwen1.5-MoE-A2.7B",
    "qwen3-30b-a3b": "Qwen3-30B-A3B",
    "phi-3-mini-4k": "Phi-3 Mini 4K",
    "pythia-160m": "Pythia-160M",
})
"""Shipped models whose makers write their names otherwise than word by word (their model cards' spelling)."""


def _title_words(name: str) -> str:
    words = name.split("-")
    return " ".join(w.upper().replace("X", "x") if re.fullmatch(r"(\d+x)?\d+(\.\d+)?[bmk]|v\d+", w)
                    else w.capitalize() for w in words)


class NotModelledError(ValueError):
    """A question the package cannot answer exactly for this model yet (it refuses rather than guess)."""


@dataclass(frozen=True)
class Linear:
    """One weight matrix applied to every token: ``in_features -> out_features``."""

    name: str
    in_features: int
    out_features: int
    bias: bool = False

    @property
    def params(self) -> int:
        """Weights plus, if ``bias``, one bias per output feature."""
        return self.in_features * self.out_features + (self.out_features if self.bias else 0)


@dataclass(frozen=True)
class MoE:
    """The mixture-of-experts part of a model: routed experts, shared experts and where they sit.

    ``shared_intermediate_size`` is the width of the always-on shared experts taken together
    (DeepSeek builds them as one MLP ``moe_intermediate_size * n_shared_experts`` wide). A layer
    ``i`` is a MoE layer when ``i >= first_dense_layers`` and ``i % layer_freq == 0``; the others
    keep the dense MLP. ``router_bias`` counts one extra value per expert in the router
    (DeepSeek-V3's ``e_score_correction_bias``, which its checkpoint stores).
    """

    num_experts: int
    experts_per_token: int
    expert_intermediate_size: int
    shared_intermediate_size: int = 0
    first_dense_layers: int = 0
    layer_freq: int = 1
    router_bias: bool = False
    layer_offset: int = 0  # Qwen's decoder_sparse_step puts experts where (layer + 1) % step == 0
    dense_layers: tuple[int, ...] = ()  # Qwen's mlp_only_layers
    shared_expert_gate: bool = False  # Qwen2-MoE scales its shared expert by a learned gate (hidden -> 1)
    # DeepSeek-V3's group-limited routing (n_group, topk_group): the experts are split into ``groups`` groups and
    # a token's experts come from at most ``groups_per_token`` of them (None: no limit)
    groups: int = 1
    groups_per_token: int | None = None

    def __post_init__(self):
        for name in ("num_experts", "experts_per_token", "expert_intermediate_size", "layer_freq", "groups"):
            _positive_int(f"MoE.{name}", getattr(self, name))
        if self.num_experts % self.groups:
            raise ValueError(f"MoE.groups ({self.groups}) must divide num_experts ({self.num_experts})")
        if self.groups_per_token is not None:
            _positive_int("MoE.groups_per_token", self.groups_per_token)
            if self.groups_per_token > self.groups:
                raise ValueError(f"MoE.groups_per_token ({self.groups_per_token}) exceeds groups ({self.groups})")
        for name in ("shared_intermediate_size", "first_dense_layers"):
            _positive_int(f"MoE.{name}", getattr(self, name), minimum=0)
        if self.experts_per_token > self.num_experts:
            raise ValueError(f"MoE.experts_per_token ({self.experts_per_token}) exceeds num_experts ({self.num_experts})")

    def moe_layers(self, num_layers: int) -> int:
        """How many of ``num_layers`` layers have experts (counted, not looped: a config may be huge)."""
        start = self.first_dense_layers
        if start >= num_layers:
            return 0
        # layers i in [start, num_layers) with (i + offset) % freq == 0
        first = start + (-(start + self.layer_offset)) % self.layer_freq
        count = 0 if first >= num_layers else (num_layers - 1 - first) // self.layer_freq + 1
        return count - sum(1 for i in set(self.dense_layers) if i < num_layers and i >= start
                           and (i + self.layer_offset) % self.layer_freq == 0)

    def is_moe_layer(self, layer: int) -> bool:
        """Whether decoder layer ``layer`` (counting from 0) has experts rather than a dense MLP."""
        return (layer >= self.first_dense_layers and (layer + self.layer_offset) % self.layer_freq == 0
                and layer not in self.dense_layers)


@dataclass(frozen=True)
class MLA:
    """Multi-head latent attention (DeepSeek-V2 and V3): low-rank queries and a cached latent.

    Each token caches ``kv_lora_rank + qk_rope_head_dim`` numbers per layer, shared by all heads,
    instead of a key and a value per KV head. ``q_lora_rank`` is None when queries are projected
    directly (no low-rank query path).
    """

    kv_lora_rank: int
    qk_rope_head_dim: int
    qk_nope_head_dim: int
    v_head_dim: int
    q_lora_rank: int | None = None

    def __post_init__(self):
        for name in ("kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim"):
            _positive_int(f"MLA.{name}", getattr(self, name))
        if self.q_lora_rank is not None:
            _positive_int("MLA.q_lora_rank", self.q_lora_rank)

    @property
    def latent_width(self) -> int:
        """Numbers cached per token per layer, the compressed KV plus the shared rotary key."""
        return self.kv_lora_rank + self.qk_rope_head_dim


@dataclass(frozen=True)
class Model:
    """The shape of a decoder-only transformer, dense (Llama family) or with experts and latent
    attention (Mixtral, DeepSeek-V3).

    ``params`` is the total count, exactly as the checkpoint stores it; ``active_params`` is what one
    token uses (the same for a dense model). ``moe`` and ``mla`` are None for a dense model with
    ordinary grouped-query attention.
    """

    name: str
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    vocab_size: int
    tie_word_embeddings: bool = False
    attention_bias: bool = False
    mlp_bias: bool = False
    max_position_embeddings: int | None = None  # the context length the model was trained for
    family: str = "llama"  # the config's model_type
    o_proj_bias: bool | None = None  # None: the same as attention_bias (Qwen2 has q/k/v biases only)
    moe: MoE | None = None
    mla: MLA | None = None
    norms_per_layer: int = 2  # Gemma 2 and 3 add a norm after attention and after the MLP: 4
    qk_norm: bool = False  # Qwen3, Gemma 3: an RMSNorm of head_dim on every query and key head
    norm_bias: bool = False  # LayerNorm with a bias beside its scale (GPT-2, GPT-NeoX)
    gated_mlp: bool = True  # gate, up and down (SwiGLU, GeGLU); False: up and down only (GPT-2, GPT-NeoX)
    position_embeddings: int = 0  # rows of a learned position table (GPT-2); 0 with rotary positions
    sliding_window: int | None = None  # keys a local-attention layer sees (Gemma 2, Gemma 3)
    sliding_layers: tuple[int, ...] = ()  # which layers (from 0) attend through the window
    # Gemma 2's tanh soft-capping of attention scores and of the final logits: a few elementwise
    # FLOPs per score, not counted (as softmax is not), but named so a reader sees the model has it
    attention_softcap: float | None = None
    final_softcap: float | None = None
    # DeepSeek-V3's multi-token prediction modules (num_nextn_predict_layers): trained beside the model (each one
    # a decoder layer, a projection and the shared output head), not part of it (not counted in params)
    mtp_layers: int = 0

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise TypeError(f"Model.name must be a non-empty string, got {self.name!r}")
        for field in ("hidden_size", "intermediate_size", "num_layers", "num_heads", "num_kv_heads", "head_dim",
                      "vocab_size"):
            _positive_int(f"Model.{field}", getattr(self, field))
        if self.max_position_embeddings is not None:
            _positive_int("Model.max_position_embeddings", self.max_position_embeddings)
        if self.num_layers > MAX_LAYERS:
            raise ValueError(f"Model.num_layers must be at most {MAX_LAYERS:,}, got {_shown(self.num_layers)}")
        _positive_int("Model.norms_per_layer", self.norms_per_layer)
        _positive_int("Model.position_embeddings", self.position_embeddings, minimum=0)
        _positive_int("Model.mtp_layers", self.mtp_layers, minimum=0)
        for field in ("qk_norm", "norm_bias", "gated_mlp"):
            if not isinstance(getattr(self, field), bool):
                raise TypeError(f"Model.{field} must be True or False, got {getattr(self, field)!r}")
        if self.sliding_window is not None:
            _positive_int("Model.sliding_window", self.sliding_window)
        if (not isinstance(self.sliding_layers, tuple) or len(set(self.sliding_layers)) != len(self.sliding_layers)
                or any(not isinstance(i, int) or not 0 <= i < self.num_layers for i in self.sliding_layers)):
            raise ValueError(f"Model.sliding_layers must be a tuple of distinct layer numbers from 0 to "
                             f"{self.num_layers - 1}, got {_shown(self.sliding_layers)}")
        if self.sliding_layers and self.sliding_window is None:
            raise ValueError("Model.sliding_layers needs a sliding_window")
        for field in ("attention_softcap", "final_softcap"):
            cap = getattr(self, field)
            if cap is not None and (isinstance(cap, bool) or not isinstance(cap, (int, float))
                                    or not 0 < cap < float("inf")):
                raise ValueError(f"Model.{field} must be a positive finite number or None, got {cap!r}")
        for field in ("tie_word_embeddings", "attention_bias", "mlp_bias"):
            if not isinstance(getattr(self, field), bool):
                raise TypeError(f"Model.{field} must be True or False, got {getattr(self, field)!r}")
        if self.o_proj_bias is not None and not isinstance(self.o_proj_bias, bool):
            raise TypeError(f"Model.o_proj_bias must be True, False or None, got {self.o_proj_bias!r}")
        if self.num_heads % self.num_kv_heads:
            raise ValueError(f"Model.num_heads ({self.num_heads}) must be a multiple of num_kv_heads "
                             f"({self.num_kv_heads}): each KV head serves a whole group of query heads")
        if self.moe is not None and not isinstance(self.moe, MoE):
            raise TypeError(f"Model.moe must be a MoE or None, got {type(self.moe).__name__}")
        if self.mla is not None and not isinstance(self.mla, MLA):
            raise TypeError(f"Model.mla must be an MLA or None, got {type(self.mla).__name__}")
        if self.moe is not None and not self.moe.moe_layers(self.num_layers):
            raise ValueError(f"Model.moe: no layer of the {self.num_layers} has experts (the first "
                             f"{self.moe.first_dense_layers} are dense, then one in {self.moe.layer_freq}, "
                             f"less {len(self.moe.dense_layers)} listed as dense); leave moe=None for a dense model")
        if self.params > MAX_PARAMS:  # each shape within its bound, their product past any count meant
            raise ValueError(f"Model {self.name!r} would have {self.params:.3g} parameters, more than the "
                             f"{MAX_PARAMS:.3g} (2**53) a model may have (published ones have a few trillion); "
                             "check hidden_size, intermediate_size, the layers and the experts")

    @property
    def attention_head_dims(self) -> tuple[int, int]:
        """The widths a query meets a key in and a value comes back in, per head: ``(d_qk, d_v)``. Both
        ``head_dim`` for standard attention; latent attention's queries and keys carry a rotary part beside the
        rest (``qk_nope_head_dim + qk_rope_head_dim``) and its values ``v_head_dim``."""
        if self.mla is not None:
            return self.mla.qk_nope_head_dim + self.mla.qk_rope_head_dim, self.mla.v_head_dim
        return self.head_dim, self.head_dim

    @property
    def title(self) -> str:
        """A display name, e.g. 'Llama 3.1 405B' for 'llama-3.1-405b' and 'Mixtral 8x7B' for 'mixtral-8x7b';
        a shipped model its makers spell otherwise is written their way ('GPT-2', 'DeepSeek-V3'), and so is
        the start of a name built from one ('DeepSeek-V3 Dense Active')."""
        name = self.name.replace("_", "-")
        for key in sorted(MAKERS_TITLES, key=len, reverse=True):
            if name == key or name.startswith(key + "-"):
                rest = name[len(key) + 1:]
                return MAKERS_TITLES[key] + (" " + _title_words(rest) if rest else "")
        return _title_words(name)

    # --- the pieces -----------------------------------------------------------------------
    def attention_linears(self) -> tuple[Linear, ...]:
        """The attention projections of one layer, in the order a token meets them."""
        h, ab = self.hidden_size, self.attention_bias
        ob = ab if self.o_proj_bias is None else self.o_proj_bias
        if self.mla is not None:
            a, heads = self.mla, self.num_heads
            qk = a.qk_nope_head_dim + a.qk_rope_head_dim
            if a.q_lora_rank is None:
                query: tuple[Linear, ...] = (Linear("q_proj", h, heads * qk),)
            else:
                query = (Linear("q_a_proj", h, a.q_lora_rank, ab), Linear("q_b_proj", a.q_lora_rank, heads * qk))
            return (
                *query,
                Linear("kv_a_proj_with_mqa", h, a.kv_lora_rank + a.qk_rope_head_dim, ab),
                Linear("kv_b_proj", a.kv_lora_rank, heads * (a.qk_nope_head_dim + a.v_head_dim)),
                Linear("o_proj", heads * a.v_head_dim, h, ob),
            )
        q, kv = self.num_heads * self.head_dim, self.num_kv_heads * self.head_dim
        return (
            Linear("q_proj", h, q, ab),
            Linear("k_proj", h, kv, ab),
            Linear("v_proj", h, kv, ab),
            Linear("o_proj", q, h, ob),
        )

    def dense_mlp_linears(self) -> tuple[Linear, ...]:
        """The MLP of a dense layer: gate, up and down projections (up and down when not gated)."""
        h, i, mb = self.hidden_size, self.intermediate_size, self.mlp_bias
        if not self.gated_mlp:
            return (Linear("up_proj", h, i, mb), Linear("down_proj", i, h, mb))
        return (Linear("gate_proj", h, i, mb), Linear("up_proj", h, i, mb), Linear("down_proj", i, h, mb))

    def expert_linears(self) -> tuple[Linear, ...]:
        """One routed expert's gate, up and down projections (an error for a dense model)."""
        e = self._require_moe("expert_linears")
        h, i = self.hidden_size, e.expert_intermediate_size
        return (Linear("expert.gate_proj", h, i), Linear("expert.up_proj", h, i), Linear("expert.down_proj", i, h))

    def shared_expert_linears(self) -> tuple[Linear, ...]:
        """The always-on shared experts of a MoE layer, as one MLP (empty when there are none)."""
        e = self._require_moe("shared_expert_linears")
        h, i = self.hidden_size, e.shared_intermediate_size
        if not i:
            return ()
        gate = (Linear("shared_expert_gate", h, 1),) if e.shared_expert_gate else ()
        return (Linear("shared.gate_proj", h, i), Linear("shared.up_proj", h, i), Linear("shared.down_proj", i, h), *gate)

    def router(self) -> Linear:
        """The router of a MoE layer: one score per expert (plus DeepSeek-V3's correction bias)."""
        e = self._require_moe("router")
        return Linear("router", self.hidden_size, e.num_experts, e.router_bias)

    def is_moe_layer(self, layer: int) -> bool:
        """Whether decoder layer ``layer`` (from 0) has experts; always False for a dense model."""
        return self.moe is not None and self.moe.is_moe_layer(layer)

    def token_linears(self, layer: int) -> tuple[Linear, ...]:
        """The matmuls one token goes through in decoder layer ``layer``: in a MoE layer the
        router, the shared experts and ``experts_per_token`` routed experts (their weights differ
        from token to token, their shapes do not)."""
        if not self.is_moe_layer(layer):
            return (*self.attention_linears(), *self.dense_mlp_linears())
        k = self.moe.experts_per_token
        return (*self.attention_linears(), self.router(), *self.shared_expert_linears(), *(self.expert_linears() * k))

    def layer_params(self, layer: int, *, active: bool = False) -> int:
        """Matmul weights (and biases) of decoder layer ``layer``: every expert, or with ``active``
        only those one token uses. Norm scales are counted apart, in :attr:`norm_params`."""
        if not self.is_moe_layer(layer):
            return sum(lin.params for lin in (*self.attention_linears(), *self.dense_mlp_linears()))
        e = self.moe
        experts = e.experts_per_token if active else e.num_experts
        return (sum(lin.params for lin in self.attention_linears()) + self.router().params
                + sum(lin.params for lin in self.shared_expert_linears())
                + experts * sum(lin.params for lin in self.expert_linears()))

    def layer_linears(self) -> tuple[Linear, ...]:
        """The matmuls of one decoder layer, in the order a token meets them (seven for Llama).

        Only for models whose layers are all alike and dense; a mixture-of-experts model gets an
        error that points to :meth:`layer_params` and :meth:`token_linears`.
        """
        if self.moe is not None:
            raise NotModelledError(
                f"{self.name} is a mixture-of-experts model: its layers differ (experts, dense layers) and a "
                "token uses only some of the experts; use layer_params(i), token_linears(i) or active_params")
        return (*self.attention_linears(), *self.dense_mlp_linears())

    @property
    def lm_head(self) -> Linear:
        """The output projection to vocabulary logits (shared with the embedding if tied)."""
        return Linear("lm_head", self.hidden_size, self.vocab_size)

    @property
    def embedding_params(self) -> int:
        """The token embedding table, vocabulary times hidden size (plus GPT-2's learned positions)."""
        return (self.vocab_size + self.position_embeddings) * self.hidden_size

    @property
    def lm_head_params(self) -> int:
        """Parameters of the output projection that are not also the embedding (0 when tied)."""
        return 0 if self.tie_word_embeddings else self.vocab_size * self.hidden_size

    @property
    def layer_matmul_params(self) -> int:
        """Weights (and biases) of one layer's matmuls (an error for a mixture-of-experts model)."""
        return sum(lin.params for lin in self.layer_linears())

    @property
    def mlp_matmul_params(self) -> int:
        """``N_mlp``: the weights (and biases) of one dense layer's MLP matrices (chapter 11; Llama 3 8B:
        176,160,768, three matrices of 4,096 x 14,336)."""
        return sum(lin.params for lin in self.dense_mlp_linears())

    @property
    def decoder_matmul_params(self) -> int:
        """Matmul weights of all decoder layers, every expert included."""
        if self.moe is None:
            return self.num_layers * self.layer_matmul_params
        return self._by_layer_kind(active=False)

    @property
    def active_decoder_matmul_params(self) -> int:
        """Matmul weights of all decoder layers that one token uses (all of them for a dense model)."""
        if self.moe is None:
            return self.decoder_matmul_params
        return self._by_layer_kind(active=True)

    def _by_layer_kind(self, *, active: bool) -> int:
        """Expert layers times one expert layer's weights, plus dense layers times a dense layer's."""
        experts = self.moe.moe_layers(self.num_layers)
        moe_layer = next(i for i in range(self.num_layers) if self.is_moe_layer(i))
        dense = self.num_layers - experts
        dense_params = sum(lin.params for lin in (*self.attention_linears(), *self.dense_mlp_linears()))
        return experts * self.layer_params(moe_layer, active=active) + dense * dense_params

    @property
    def norm_params(self) -> int:
        """Norm scales (and LayerNorm biases): ``norms_per_layer`` per layer and one final, plus
        MLA's two latent norms or the query and key norms of one head's width, per layer."""
        extra = 0
        if self.mla is not None:
            extra = self.num_layers * (self.mla.kv_lora_rank + (self.mla.q_lora_rank or 0))
        if self.qk_norm:
            extra += self.num_layers * 2 * self.head_dim
        per_norm = self.hidden_size * (2 if self.norm_bias else 1)
        return (self.norms_per_layer * self.num_layers + 1) * per_norm + extra

    @property
    def params(self) -> int:
        """Total parameters, exactly as the checkpoint stores them (8,030,261,248 for Llama 3 8B).

        Every expert counts. Multi-token-prediction modules that some checkpoints carry beside the
        model (DeepSeek-V3's ``num_nextn_predict_layers``) are not part of the model and not counted.
        """
        return self.decoder_matmul_params + self.embedding_params + self.lm_head_params + self.norm_params

    @property
    def active_params(self) -> int:
        """Parameters one token uses, the total less the routed experts it is not sent to.

        Embedding and output head both count, as in Mistral's 12.9B for Mixtral 8x7B; DeepSeek's
        36.6B for DeepSeek-V3 leaves out the input embedding (``active_params - embedding_params``).
        Equal to :attr:`params` for a dense model.
        """
        return self.active_decoder_matmul_params + self.embedding_params + self.lm_head_params + self.norm_params

    @property
    def attention_width(self) -> int:
        """Query heads times head size (the width attention's score and value products run over)."""
        if self.mla is not None:
            raise NotModelledError(
                f"{self.name} uses multi-head latent attention: its score and value products have different "
                "widths, and absorbed kernels compute them in the latent space; not modelled yet")
        return self.num_heads * self.head_dim

    def kv_bytes_per_token(self, dtype: str = "bf16") -> float:
        """KV-cache bytes one token adds: K and V, every layer, every KV head (Llama 3 8B: 131,072).

        With latent attention the cache holds ``kv_lora_rank + qk_rope_head_dim`` numbers per layer
        instead (DeepSeek-V3: 576 per layer, 70,272 bytes in bf16).
        """
        return self.num_layers * self.kv_bytes_per_layer(dtype)

    def kv_bytes_per_layer(self, dtype: str = "bf16") -> float:
        """KV-cache bytes one token adds in one layer: a key and a value per KV head (Llama 3 8B: 8 heads of
        128, 4,096 bytes in bf16), or the latent and its rotary key under latent attention (DeepSeek-V3:
        576 numbers, 1,152 bytes)."""
        width = self.mla.latent_width if self.mla is not None else 2 * self.num_kv_heads * self.head_dim
        return width * dtype_bytes(dtype)

    @property
    def full_attention_layers(self) -> int:
        """Layers whose attention sees the whole context (all of them without a sliding window)."""
        return self.num_layers - len(self.sliding_layers)

    def kv_cache_bytes(self, tokens, dtype: str = "bf16"):
        """Bytes of KV cache one sequence of ``tokens`` tokens holds: every layer keeps every token,
        except a sliding-window layer, which keeps the last ``sliding_window`` (Gemma 2: 4,096 on
        every other layer). Broadcasts over ``tokens``."""
        tokens = number("tokens", tokens, integer=True, strict=False)
        if not self.sliding_layers:
            return self.kv_bytes_per_token(dtype) * tokens
        per_layer = self.kv_bytes_per_layer(dtype)
        kept = self.full_attention_layers * tokens + len(self.sliding_layers) * np.minimum(tokens, self.sliding_window)
        out = per_layer * np.asarray(kept, dtype=float)
        return out.item() if out.ndim == 0 else out

    def attention_flops(self, queries, keys, *, causal: bool | str = False):
        """Score and value FLOPs of every layer for ``queries`` queries over ``keys`` keys, each
        sliding-window layer counted through its window (:func:`roofline.core.ops.attention_flops`)."""
        width = self.attention_width
        full = attention_flops(queries, keys, width, self.full_attention_layers, causal=causal) \
            if self.full_attention_layers else 0.0
        if not self.sliding_layers:
            return full
        return full + attention_flops(queries, keys, width, len(self.sliding_layers), causal=causal,
                                      window=self.sliding_window)

    @property
    def gqa_group(self) -> int:
        """Query heads sharing one KV head (1 = multi-head, num_heads = multi-query)."""
        return self.num_heads // self.num_kv_heads

    def _require_moe(self, what: str) -> MoE:
        if self.moe is None:
            raise ValueError(f"{what}: {self.name} is a dense model with no experts")
        return self.moe


# The largest width or count a model may have: 2**53, past which a float no longer holds every whole
# number (the formulas multiply these in floating point).
LARGEST = 2**53
MAX_LAYERS = 100_000
"""The most layers a config may give: the deepest published decoders have a few hundred. Several counts
(sliding-window layers, expert layers) are held or walked layer by layer, so a layer count is bounded
before anything is built from it."""

MAX_WIDTH = 2**20
"""The widest hidden size, head width, latent rank or MLP a model may have (1,048,576): the widest published
are a few tens of thousands (Llama 3.1 405B: hidden 16,384, MLP 53,248)."""
MAX_HEADS = 2**16
"""The most attention heads (query or key/value) a model may have (65,536): published models have up to 128."""
MAX_VOCAB = 2**24
"""The largest vocabulary (16,777,216 tokens): published ones have up to a few hundred thousand (Gemma: 256,000)."""
MAX_EXPERTS = 2**16
"""The most routed experts (65,536): published mixtures of experts have up to a few hundred (DeepSeek-V3: 256)."""
MAX_POSITIONS = 2**30
"""The longest context or sliding window a config may give (1,073,741,824 tokens): published ones reach ten
million."""
MAX_PARAMS = 2**53
"""The most parameters a model may have (about 9.0e15): past it a float no longer holds every whole number, and
the largest published models have a few trillion. Every shape within the bounds above can still multiply past it,
so the total is checked too."""

# each bounded field of a Model (and of its MoE and MLA) and of a config.json, with its bound
_LIMITS = {"hidden_size": MAX_WIDTH, "intermediate_size": MAX_WIDTH, "head_dim": MAX_WIDTH,
           "num_heads": MAX_HEADS, "num_kv_heads": MAX_HEADS, "num_attention_heads": MAX_HEADS,
           "num_key_value_heads": MAX_HEADS, "vocab_size": MAX_VOCAB,
           "max_position_embeddings": MAX_POSITIONS, "sliding_window": MAX_POSITIONS,
           "position_embeddings": MAX_POSITIONS, "norms_per_layer": 16,
           "num_experts": MAX_EXPERTS, "num_local_experts": MAX_EXPERTS, "n_routed_experts": MAX_EXPERTS,
           "experts_per_token": MAX_EXPERTS, "num_experts_per_tok": MAX_EXPERTS, "n_shared_experts": MAX_EXPERTS,
           "expert_intermediate_size": MAX_WIDTH, "moe_intermediate_size": MAX_WIDTH,
           "shared_intermediate_size": MAX_WIDTH * 64, "shared_expert_intermediate_size": MAX_WIDTH,
           "first_dense_layers": MAX_LAYERS, "first_k_dense_replace": MAX_LAYERS, "layer_freq": MAX_LAYERS,
           "decoder_sparse_step": MAX_LAYERS, "moe_layer_freq": MAX_LAYERS, "sliding_window_pattern": MAX_LAYERS,
           "max_window_layers": MAX_LAYERS,
           "kv_lora_rank": MAX_WIDTH, "q_lora_rank": MAX_WIDTH, "qk_rope_head_dim": MAX_WIDTH,
           "qk_nope_head_dim": MAX_WIDTH, "v_head_dim": MAX_WIDTH, "n_embd": MAX_WIDTH, "n_inner": MAX_WIDTH}


def _shown(value) -> str:
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > LARGEST:
        return f"an integer of {len(str(abs(value))):,} digits"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _bound(key: str) -> tuple[int, str]:
    """The largest value a shape field may take, and the words that say so."""
    most = _LIMITS.get(key.rsplit(".", 1)[-1], LARGEST)
    return most, "2**53" if most == LARGEST else f"{most:,}"


def _positive_int(name: str, value, *, minimum: int = 1) -> int:
    """``value`` if it is a whole number from ``minimum`` to the field's bound (:data:`MAX_WIDTH` and the rest,
    else 2**53), else an error naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be a whole number (an int), got {type(value).__name__} {_shown(value)}")
    most, said = _bound(name)
    if not minimum <= value <= most:
        what = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
        raise ValueError(f"{name} must be {what} no larger than {said}, got {_shown(value)}")
    return value


def _int_field(config: dict, key: str, where: str, default=None, *, minimum: int = 1) -> int:
    if key not in config or config[key] is None:
        if default is not None:
            return default
        raise ValueError(f"{where}: config is missing '{key}'")
    value = config[key]
    most, said = _bound(key)
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= most:
        what = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
        cap = f" (at most {said})" if isinstance(value, int) and value > most else ""
        raise ValueError(f"{where}: '{key}' must be {what}{cap}, got {_shown(value)}")
    return value


def _layers(config: dict, where: str) -> int:
    layers = _int_field(config, "num_hidden_layers", where)
    if layers > MAX_LAYERS:
        raise ValueError(f"{where}: 'num_hidden_layers' must be at most {MAX_LAYERS:,} (the deepest published models "
                         f"have a few hundred), got {_shown(layers)}")
    return layers


def _bool_field(config: dict, key: str, where: str, default: bool = False) -> bool:
    value = config.get(key, default)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise ValueError(f"{where}: '{key}' must be true or false, got {value!r}")
    return value


def _groups(config: dict, where: str) -> dict:
    """DeepSeek's group-limited routing (``n_group``, ``topk_group``) as :class:`MoE`'s ``groups`` and
    ``groups_per_token``; none where the config names no groups or routes without the limit (``topk_method``
    'greedy')."""
    if config.get("n_group") is None or config.get("topk_group") is None or config.get("topk_method") == "greedy":
        return {}
    return {"groups": _int_field(config, "n_group", where), "groups_per_token": _int_field(config, "topk_group", where)}


def _moe(config: dict, family: str, where: str) -> MoE | None:
    experts_key = {"mixtral": "num_local_experts", "qwen2_moe": "num_experts", "qwen3_moe": "num_experts"}.get(
        family, "n_routed_experts")
    if family in _MOE_FAMILIES or (family in _MLA_FAMILIES and config.get("n_routed_experts") is not None):
        experts = _int_field(config, experts_key, where)
        per_token = _int_field(config, "num_experts_per_tok", where)
        if per_token > experts:
            raise ValueError(f"{where}: 'num_experts_per_tok' ({per_token}) exceeds the number of experts ({experts})")
    if family == "mixtral":
        experts = _int_field(config, "num_local_experts", where)
        moe = MoE(experts, _int_field(config, "num_experts_per_tok", where),
                  _int_field(config, "intermediate_size", where))
    elif family in ("qwen2_moe", "qwen3_moe"):
        dense = config.get("mlp_only_layers") or []
        if not isinstance(dense, list) or any(isinstance(i, bool) or not isinstance(i, int) for i in dense):
            raise ValueError(f"{where}: 'mlp_only_layers' must be a list of layer numbers, got {_shown(dense)}")
        shared = _int_field(config, "shared_expert_intermediate_size", where, default=0, minimum=0) \
            if family == "qwen2_moe" else 0
        moe = MoE(_int_field(config, "num_experts", where), _int_field(config, "num_experts_per_tok", where),
                  _int_field(config, "moe_intermediate_size", where), shared_intermediate_size=shared,
                  layer_freq=_int_field(config, "decoder_sparse_step", where, default=1), layer_offset=1,
                  dense_layers=tuple(dense), shared_expert_gate=bool(shared))
    elif family in _MLA_FAMILIES:
        if config.get("n_routed_experts") is None:
            return None
        experts = _int_field(config, "n_routed_experts", where)
        moe_width = _int_field(config, "moe_intermediate_size", where)
        shared = _int_field(config, "n_shared_experts", where, default=0, minimum=0)
        moe = MoE(experts, _int_field(config, "num_experts_per_tok", where), moe_width,
                  shared_intermediate_size=shared * moe_width,
                  first_dense_layers=_int_field(config, "first_k_dense_replace", where, default=0, minimum=0),
                  layer_freq=_int_field(config, "moe_layer_freq", where, default=1),
                  router_bias=config.get("topk_method") == "noaux_tc", **_groups(config, where))
    else:
        if any(k in config for k in ("num_local_experts", "n_routed_experts", "num_experts")):
            raise ValueError(f"{where}: model_type {family!r} with experts is not supported; "
                             f"mixture-of-experts families: {', '.join(sorted(_MOE_FAMILIES | _MLA_FAMILIES))}")
        return None
    layers = _layers(config, where)
    if not any(moe.is_moe_layer(i) for i in range(layers)) and moe.first_dense_layers < layers:
        raise ValueError(f"{where}: no layer of the {layers} has experts (mlp_only_layers, decoder_sparse_step); "
                         "a config with experts needs at least one expert layer")
    if moe.first_dense_layers >= layers:
        raise ValueError(f"{where}: 'first_k_dense_replace' ({moe.first_dense_layers}) leaves no layer of the "
                         f"{layers} with experts; a model with experts needs first_k_dense_replace < num_hidden_layers")
    return moe


# GPT-2's config.json names its fields differently; the loader reads them under the common names.
_GPT2_KEYS = {"n_embd": "hidden_size", "n_head": "num_attention_heads", "n_layer": "num_hidden_layers",
              "n_positions": "max_position_embeddings"}
# Families that tie the output head to the embedding when the config does not say (transformers' defaults).
_TIED_BY_DEFAULT = {"gemma", "gemma2", "gemma3_text", "gpt2"}


def _sliding(config: dict, family: str, layers: int, where: str) -> tuple[int | None, tuple[int, ...]]:
    """The sliding window and the layers that use it, as each family's implementation places them."""
    types = config.get("layer_types")
    if family not in ("gemma2", "gemma3_text", "mistral", "phi3", "qwen2", "qwen3", "qwen2_moe", "qwen3_moe"):
        return None, ()
    window = config.get("sliding_window")
    if window is None:
        return None, ()
    window = _int_field(config, "sliding_window", where)
    if types is not None:
        if not isinstance(types, list) or len(types) != layers or not all(isinstance(t, str) for t in types):
            raise ValueError(f"{where}: 'layer_types' must list one attention type per layer ({layers}), "
                             f"got {_shown(types)}")
        return window, tuple(i for i, t in enumerate(types) if t == "sliding_attention")
    if family == "gemma2":  # local and global attention alternate, local first
        return window, tuple(range(0, layers, 2))
    if family == "gemma3_text":  # five local layers, then one global
        pattern = _int_field(config, "sliding_window_pattern", where, default=6)
        return window, tuple(i for i in range(layers) if (i + 1) % pattern)
    if family in ("mistral", "phi3"):  # every layer (Mistral 7B v0.1: 4,096; Phi-3 mini 4k: 2,047)
        return window, tuple(range(layers))
    if not _bool_field(config, "use_sliding_window", where):  # Qwen: off unless asked for
        return None, ()
    first = _int_field(config, "max_window_layers", where, default=layers, minimum=0)
    return window, tuple(range(first, layers))


def model_from_config(config: dict, name: str = "model") -> Model:
    """Build a :class:`Model` from the dict of a Hugging Face ``config.json``.

    Reads the families in ``FAMILIES`` (``model_type``): llama, mistral, qwen2, qwen3, phi3, gemma,
    gemma2, gemma3_text (dense), gpt2 and gpt_neox (LayerNorm, plain MLP), mixtral, qwen2_moe and
    qwen3_moe (mixture of experts) and deepseek_v2/deepseek_v3 (experts and latent attention).
    Biases, norms, tied embeddings and sliding windows follow each family's Hugging Face
    implementation: Llama reads ``attention_bias`` and ``mlp_bias``; Mistral, Mixtral, Phi-3 and
    Gemma have none; Qwen2 has q, k and v biases but no o_proj bias; GPT-2 and GPT-NeoX have biases
    everywhere; Qwen3 and Gemma 3 normalize queries and keys; Gemma 2 and 3 have four norms a layer
    and local (sliding-window) layers among global ones. Soft-capping (Gemma 2) and a fused q/k/v
    or gate/up matrix (Phi-3, GPT-2) change no count. A missing or malformed field gets a
    ``ValueError`` that names it.
    """
    if not isinstance(config, dict):
        raise TypeError(f"config must be the dict of a config.json, got {type(config).__name__}")
    where = f"model config {name!r}"
    family = config.get("model_type")
    if family is not None and not isinstance(family, str):
        raise ValueError(f"{where}: 'model_type' must be a string such as \"llama\", got {_shown(family)}; "
                         f"supported: {', '.join(sorted(FAMILIES))}")
    if family not in FAMILIES and isinstance(config.get("text_config"), dict):
        inner = config["text_config"].get("model_type")
        raise ValueError(f"{where}: model_type {family!r} is a multimodal model (a vision tower beside a language "
                         f"model), which is not counted; its text_config (model_type {inner!r}) "
                         + ("is supported: load that dict on its own" if inner in FAMILIES else "is not supported either")
                         + f"; supported: {', '.join(sorted(FAMILIES))}")
    if family not in FAMILIES:
        raise ValueError(f"{where}: model_type {family!r} is not supported yet; supported: {', '.join(sorted(FAMILIES))}")
    if family not in _MLA_FAMILIES and "kv_lora_rank" in config:
        raise ValueError(f"{where}: latent-attention fields (kv_lora_rank) in a {family!r} config are not supported")
    if family == "gpt2":
        config = {**config, **{common: config[own] for own, common in _GPT2_KEYS.items() if own in config}}
        if config.get("n_inner") is None and "hidden_size" in config:
            config["intermediate_size"] = 4 * _int_field(config, "hidden_size", where)
        else:
            config["intermediate_size"] = config.get("n_inner")
    hidden = _int_field(config, "hidden_size", where)
    heads = _int_field(config, "num_attention_heads", where)
    kv_heads = _int_field(config, "num_key_value_heads", where, default=heads)
    layers = _layers(config, where)
    mla = None
    if family in _MLA_FAMILIES:
        q_rank = None if config.get("q_lora_rank") is None else _int_field(config, "q_lora_rank", where)
        mla = MLA(kv_lora_rank=_int_field(config, "kv_lora_rank", where),
                  qk_rope_head_dim=_int_field(config, "qk_rope_head_dim", where),
                  qk_nope_head_dim=_int_field(config, "qk_nope_head_dim", where),
                  v_head_dim=_int_field(config, "v_head_dim", where), q_lora_rank=q_rank)
        head_dim = mla.qk_nope_head_dim + mla.qk_rope_head_dim
    else:
        head_dim = config.get("head_dim")
        if head_dim is None:
            if hidden % heads:
                raise ValueError(f"{where}: hidden_size {hidden} is not a multiple of num_attention_heads {heads}; give head_dim")
            head_dim = hidden // heads
        head_dim = _int_field({"head_dim": head_dim}, "head_dim", where)
    if heads % kv_heads:
        raise ValueError(f"{where}: num_attention_heads {heads} is not a multiple of num_key_value_heads {kv_heads}")
    if family == "llama":
        attention_bias, o_bias = _bool_field(config, "attention_bias", where), None
        mlp_bias = _bool_field(config, "mlp_bias", where)
    elif family in ("qwen2", "qwen2_moe"):
        attention_bias, o_bias, mlp_bias = True, False, False
    elif family in _MLA_FAMILIES or family in ("gemma", "gemma2", "gemma3_text", "qwen3", "qwen3_moe"):
        attention_bias, o_bias, mlp_bias = _bool_field(config, "attention_bias", where), None, False
    elif family in ("gpt2", "gpt_neox"):
        attention_bias, o_bias, mlp_bias = True, None, True
    else:  # mistral, mixtral, phi3
        attention_bias, o_bias, mlp_bias = False, None, False
    max_pos = config.get("max_position_embeddings")
    if max_pos is not None:
        max_pos = _int_field(config, "max_position_embeddings", where)
    window, sliding = _sliding(config, family, layers, where)
    return _built(where,
        name=name,
        hidden_size=hidden,
        intermediate_size=_int_field(config, "intermediate_size", where),
        num_layers=layers,
        num_heads=heads,
        num_kv_heads=kv_heads,
        head_dim=head_dim,
        vocab_size=_int_field(config, "vocab_size", where),
        tie_word_embeddings=_bool_field(config, "tie_word_embeddings", where, default=family in _TIED_BY_DEFAULT),
        attention_bias=attention_bias,
        mlp_bias=mlp_bias,
        max_position_embeddings=max_pos,
        family=family,
        o_proj_bias=o_bias,
        moe=_moe(config, family, where),
        mla=mla,
        norms_per_layer=4 if family in ("gemma2", "gemma3_text") else 2,
        qk_norm=family in ("qwen3", "qwen3_moe", "gemma3_text"),
        norm_bias=family in ("gpt2", "gpt_neox"),
        gated_mlp=family not in ("gpt2", "gpt_neox"),
        position_embeddings=max_pos if family == "gpt2" else 0,
        sliding_window=window,
        sliding_layers=sliding,
        attention_softcap=_cap(config, "attn_logit_softcapping", where),
        final_softcap=_cap(config, "final_logit_softcapping", where),
        mtp_layers=_int_field(config, "num_nextn_predict_layers", where, default=0, minimum=0)
        if family in _MLA_FAMILIES else 0,
    )


def _built(where: str, **fields) -> Model:
    """``Model(**fields)``, its refusal (too many parameters) said of the config it came from."""
    try:
        return Model(**fields)
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from None


def _cap(config: dict, key: str, where: str) -> float | None:
    value = config.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < float("inf"):
        raise ValueError(f"{where}: '{key}' must be a positive number or null, got {_shown(value)}")
    return float(value)


@cache
def _shipped() -> dict[str, str]:
    folder = resources.files("roofline").joinpath("data/models")
    return {p.name.removesuffix(".json"): p.name for p in folder.iterdir() if p.name.endswith(".json")}


def model_names() -> list[str]:
    """Names of the shipped model configs, e.g. ['llama-3-8b', ...]."""
    return sorted(_shipped())


@cache
def _load_shipped(name: str) -> Model:
    text = resources.files("roofline").joinpath(f"data/models/{name}.json").read_text(encoding="utf-8")
    return model_from_config(json.loads(text), name)


def load_model(name_or_path: str | Path | Model) -> Model:
    """A shipped model by name ('llama-3-8b') or any ``config.json`` by path."""
    if isinstance(name_or_path, Model):
        return name_or_path
    if not isinstance(name_or_path, (str, Path)):
        raise TypeError(f"model must be a name such as 'llama-3-8b', a path to a config.json, or a Model; got {name_or_path!r}")
    key = str(name_or_path).strip().lower()
    if key in _shipped():
        return _load_shipped(key)
    path = Path(name_or_path)
    try:
        is_file, is_dir = path.is_file(), path.is_dir()
        inside = path / "config.json"
        has_config = is_dir and inside.is_file()
        parent_exists = path.parent.is_dir()
    except (OSError, ValueError):  # a name too long for a file name, a NUL byte: no such file
        is_file = is_dir = has_config = False
        parent_exists = None
    if is_file:
        return _load_file(path)
    if has_config:
        return _load_file(inside)
    if is_dir:
        raise ValueError(f"model {_shown(str(name_or_path))} is a directory with no config.json in it; "
                         "give a shipped model's name or the path of a config.json")
    if isinstance(name_or_path, Path) or _looks_like_path(str(name_or_path)):
        where = ("it is not a path this system can open (too long, or a character no file name has)"
                 if parent_exists is None else "its folder does not exist either" if not parent_exists
                 else f"there is no such file in {str(path.parent)!r}")
        raise ValueError(f"model config {_shown(str(name_or_path))} not found: {where}")
    raise unknown_name("model", str(name_or_path), _shipped())


def _looks_like_path(text: str) -> bool:
    """Whether a model argument was meant as a file path rather than a shipped model's name."""
    return "/" in text or "\\" in text or text.endswith(".json") or text.startswith(("~", "."))


def _load_file(path: Path) -> Model:
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"model config {str(path)!r} is not UTF-8 text (byte {exc.start}: "
                         f"{exc.object[exc.start:exc.start + 1]!r}); a config.json is UTF-8 JSON") from None
    except OSError as exc:
        raise ValueError(f"model config {str(path)!r} cannot be read: {exc.strerror or exc}") from None
    try:
        config = json.loads(text)
    except ValueError as exc:  # not JSON, or an integer of more digits than Python will read
        raise ValueError(f"model config {str(path)!r} is not valid JSON: {exc}") from None
    except RecursionError:
        raise ValueError(f"model config {str(path)!r} is nested too deeply to read; a config.json is a flat "
                         "object with a few nested tables") from None
    if not isinstance(config, dict):
        raise ValueError(f"model config {str(path)!r} must hold a JSON object {{...}}, got a {type(config).__name__}")
    return model_from_config(config, path.parent.name if path.name == "config.json" else path.stem)


def param_count(model: "Model | str | float", *, active: bool = False) -> float:
    """Parameters of a :class:`Model`, a shipped model's name, or a count given directly.

    ``active`` asks for the parameters one token uses (they differ for mixture-of-experts models).
    """
    if isinstance(model, (Model, str, Path)):
        m = load_model(model)
        return float(m.active_params if active else m.params)
    return number("model", model)



def model_config(name: str) -> dict:
    """A fresh copy of a shipped model's ``config.json`` as a dict (chapter 5 edits one: Llama 3 8B with
    one KV head), for :func:`model_from_config`."""
    if not isinstance(name, str):
        raise TypeError(f"name must be a shipped model's name such as 'llama-3-8b', got {name!r}")
    key = name.strip().lower()
    if key not in _shipped():
        raise unknown_name("model", name, _shipped())
    return json.loads(resources.files("roofline").joinpath(f"data/models/{key}.json").read_text(encoding="utf-8"))


__all__ += ["model_config"]


class LayerComponent(NamedTuple):
    """Chapter 2: one piece of a decoder layer: its ``name``, its ``params`` and its forward FLOPs per token
    (``flops``)."""

    name: str
    params: int
    flops: float


def layer_components(model: Model | str, context: int, *, causal: bool = True) -> tuple[LayerComponent, ...]:
    """Chapter 2: one full-attention decoder layer of a dense model, piece by piece, with its parameters and
    forward FLOPs per token in a sequence of ``context`` tokens.

    Each matmul (:meth:`Model.layer_linears`: the q, k, v and o projections, the MLP's gate, up and down) runs
    two FLOPs per weight per token (a multiply and an add). The layer's norms hold ``norms_per_layer`` scales
    of the hidden size (:attr:`Model.norm_params`, less the final norm, per layer) and are charged two FLOPs a
    scale a token, as the first-order count of chapter 1 charges them. Attention's score (``QK^T``) and value
    (``PV``) products hold no parameters; over the sequence they run ``2 S^2 d`` FLOPs each, half of that with
    the causal mask (:func:`roofline.core.ops.attention_flops`), so ``S d`` a token each with the mask and ``2 S
    d`` without."""
    m = load_model(model)
    if m.moe is not None or m.mla is not None:
        raise NotModelledError(f"layer_components lists one dense layer; {m.name} has "
                               f"{'experts' if m.moe is not None else 'latent attention'}")
    s = int(number("context", context, integer=True))
    if not isinstance(causal, bool):
        raise TypeError(f"causal must be True or False, got {causal!r}")
    out = [LayerComponent(lin.name, lin.params, 2.0 * lin.params) for lin in m.layer_linears()]
    final = m.hidden_size * (2 if m.norm_bias else 1)
    norms = (m.norm_params - final) // m.num_layers
    out.append(LayerComponent("norms", norms, 2.0 * norms))
    pair = float(attention_flops(s, s, m.attention_width, 1, causal="half" if causal else False)) / (2 * s)
    out += [LayerComponent("attention scores (QK^T)", 0, pair), LayerComponent("attention values (PV)", 0, pair)]
    return tuple(out)


__all__ += ["LayerComponent", "layer_components"]
