"""The model catalog beyond Llama 3 8B: GQA/MQA, biases per family, mixture of experts, latent attention.

Exact counts are the ones a reader can check against the checkpoints' safetensors indexes and the
model cards (see chapters/reference/cli.md for the sources).
"""

import json
from importlib import resources

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import roofline as rl
from roofline.core.model import NotModelledError, model_from_config
import roofline.core.model

SHIPPED = ["llama-2-7b", "llama-3-8b", "llama-3-70b", "llama-3.1-8b", "llama-3.1-70b", "llama-3.3-70b", "llama-3.1-405b", "mixtral-8x7b", "deepseek-v3", "qwen2-7b",
           "gemma-7b", "gemma-2-9b", "gemma-3-1b", "qwen3-8b", "qwen3-30b-a3b", "qwen1.5-moe-a2.7b", "phi-3-mini-4k",
           "gpt2", "pythia-160m"]


@pytest.mark.parametrize(
    "name, total, active",
    [
        ("llama-2-7b", 6_738_415_616, 6_738_415_616),
        ("llama-3-8b", 8_030_261_248, 8_030_261_248),
        ("llama-3-70b", 70_553_706_496, 70_553_706_496),
        # Llama 3.1 and 3.3 keep Llama 3's shapes; only the context (and its RoPE scaling) grows
        ("llama-3.1-8b", 8_030_261_248, 8_030_261_248),
        ("llama-3.1-70b", 70_553_706_496, 70_553_706_496),
        ("llama-3.3-70b", 70_553_706_496, 70_553_706_496),
        ("llama-3.1-405b", 405_853_388_800, 405_853_388_800),
        ("qwen2-7b", 7_615_616_512, 7_615_616_512),
        # Mistral's model card: 46.7B total, 12.9B used per token (two of eight experts, router included)
        ("mixtral-8x7b", 46_702_792_704, 12_879_925_248),
        # DeepSeek-V3 main model without the MTP module: 671B; 37B active with both embedding and head
        ("deepseek-v3", 671_026_419_200, 37_552_297_472),
    ],
)
def test_exact_parameter_counts(name, total, active):
    m = rl.load_model(name)
    assert m.params == total
    assert m.active_params == active


def test_every_shipped_config_is_a_hugging_face_config():
    for name in SHIPPED:
        raw = json.loads(resources.files("roofline").joinpath(f"data/models/{name}.json").read_text())
        assert raw["model_type"] in rl.core.model.FAMILIES
        assert raw["architectures"][0].endswith(("ForCausalLM", "LMHeadModel"))
    assert set(SHIPPED) <= set(rl.model_names())


def test_deepseek_v3_as_deepseek_counts_it():
    m = rl.load_model("deepseek-v3")
    # README_WEIGHTS.md: 36.6B activated "including 0.9B for the output Head", i.e. without the input embedding
    assert m.active_params - m.embedding_params == 36_625_618_432
    assert m.embedding_params == 926_679_040
    # 3 dense layers, then 58 MoE layers of 256 routed + 1 shared expert, 8 routed per token
    assert [m.is_moe_layer(i) for i in range(4)] == [False, False, False, True]
    assert sum(m.is_moe_layer(i) for i in range(m.num_layers)) == 58
    # the router stores one correction bias per expert beside its weights
    assert m.router().params == 256 * 7168 + 256


def test_latent_kv_cache_is_one_latent_per_layer():
    m = rl.load_model("deepseek-v3")
    assert m.mla.latent_width == 512 + 64
    assert m.kv_bytes_per_token("bf16") == 61 * 576 * 2 == 70_272
    # the same heads with ordinary multi-head attention would cache K and V of 128 heads
    assert 2 * 61 * 128 * (128 + 64) * 2 / m.kv_bytes_per_token() > 60


def test_mla_attention_projections():
    names = [lin.name for lin in rl.load_model("deepseek-v3").attention_linears()]
    assert names == ["q_a_proj", "q_b_proj", "kv_a_proj_with_mqa", "kv_b_proj", "o_proj"]
    lite = model_from_config(_deepseek(q_lora_rank=None))
    assert [lin.name for lin in lite.attention_linears()][0] == "q_proj"


def test_qwen2_has_qkv_biases_but_no_o_bias():
    m = rl.load_model("qwen2-7b")
    bias = {lin.name: lin.bias for lin in m.layer_linears()}
    assert bias == {"q_proj": True, "k_proj": True, "v_proj": True, "o_proj": False,
                    "gate_proj": False, "up_proj": False, "down_proj": False}
    no_bias = model_from_config({**_config(), "model_type": "llama"})
    with_bias = model_from_config({**_config(), "model_type": "qwen2"})
    # q (4 heads x 16) + k and v (2 heads x 16 each) per layer, two layers
    assert with_bias.params - no_bias.params == 2 * (64 + 32 + 32)


def test_mistral_ignores_bias_flags_as_its_implementation_does():
    plain = model_from_config(_config(model_type="mistral"))
    flagged = model_from_config(_config(model_type="mistral", attention_bias=True))
    assert plain.params == flagged.params


def test_llama_2_is_multi_head_and_llama_3_grouped():
    assert rl.load_model("llama-2-7b").gqa_group == 1
    assert rl.load_model("llama-3-70b").gqa_group == 8
    assert rl.load_model("llama-2-7b").kv_bytes_per_token() == 2 * 32 * 32 * 128 * 2


def test_chapter_one_decode_numbers_unchanged(llama, h100):
    step = rl.decode_step(llama)
    assert step.flops == step.bytes == pytest.approx(16.06e9, rel=1e-3)
    assert rl.predict(step, h100).time == pytest.approx(4.794e-3, rel=1e-3)


def test_moe_decode_at_batch_one_reads_only_the_active_weights():
    m = rl.load_model("mixtral-8x7b")
    step = rl.decode_step(m, batch=1)
    # text accounting: one multiply-add per active parameter, each read once in bf16
    assert step.flops == 2 * m.active_params
    assert step.bytes == 2 * m.active_params
    refined = rl.decode_step(m, batch=1, context=100, accounting="refined")
    assert refined["weights"].bytes == 2 * m.active_decoder_matmul_params


@pytest.mark.parametrize("call", [
    lambda: rl.decode_step("mixtral-8x7b", batch=2),
    lambda: rl.decode_step("mixtral-8x7b", batch=[1, 2, 4]),
    lambda: rl.prefill("mixtral-8x7b", 512),
])
def test_moe_steps_with_many_tokens_are_refused(call):
    with pytest.raises(NotModelledError, match="depends on the\\s+routing"):
        call()


def test_mla_workloads_are_refused_not_guessed():
    with pytest.raises(NotModelledError, match="latent attention"):
        rl.decode_step("deepseek-v3", accounting="refined")  # the text accounting models it (chapter 10)
    with pytest.raises(NotModelledError, match="latent attention"):
        rl.load_model("deepseek-v3").attention_width
    with pytest.raises(NotModelledError, match="mixture-of-experts"):
        rl.load_model("mixtral-8x7b").layer_linears()


def test_moe_training_flops_use_active_parameters_and_memory_the_total():
    m = rl.load_model("mixtral-8x7b")
    assert rl.training_flops_per_token(m) == 6 * m.active_params
    assert rl.model_state_bytes(m) == 16 * m.params


# --- random well-formed configs ---------------------------------------------------------------

def _config(**changes):
    base = {"model_type": "llama", "hidden_size": 64, "intermediate_size": 160, "num_hidden_layers": 2,
            "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 1000}
    base.update(changes)
    return {k: v for k, v in base.items() if v is not None}


def _mixtral(**changes):
    return _config(**{"model_type": "mixtral", "num_local_experts": 4, "num_experts_per_tok": 2, **changes})


def _deepseek(**changes):
    base = dict(model_type="deepseek_v3", num_key_value_heads=4, q_lora_rank=24, kv_lora_rank=16,
                qk_rope_head_dim=8, qk_nope_head_dim=16, v_head_dim=16, n_routed_experts=8, n_shared_experts=1,
                num_experts_per_tok=2, moe_intermediate_size=32, first_k_dense_replace=1, num_hidden_layers=3,
                topk_method="noaux_tc")
    base.update(changes)
    return _config(**base)


families = st.sampled_from(["llama", "mistral", "qwen2", "mixtral", "deepseek_v3"])


@st.composite
def configs(draw, family=families):
    fam = draw(family)
    heads = draw(st.sampled_from([1, 2, 4, 8]))
    kv = draw(st.sampled_from([d for d in (1, 2, 4, 8) if heads % d == 0]))
    cfg = dict(model_type=fam, hidden_size=heads * draw(st.integers(1, 16)), num_attention_heads=heads,
               num_key_value_heads=kv, intermediate_size=draw(st.integers(1, 300)),
               num_hidden_layers=draw(st.integers(1, 12)), vocab_size=draw(st.integers(1, 5000)),
               tie_word_embeddings=draw(st.booleans()))
    if draw(st.booleans()) and fam != "deepseek_v3":
        cfg["head_dim"] = draw(st.integers(1, 64))
    if fam == "mixtral":
        e = draw(st.integers(1, 16))
        cfg.update(num_local_experts=e, num_experts_per_tok=draw(st.integers(1, e)))
    if fam == "deepseek_v3":
        e = draw(st.integers(1, 16))
        cfg.update(q_lora_rank=draw(st.one_of(st.none(), st.integers(1, 64))), kv_lora_rank=draw(st.integers(1, 64)),
                   qk_rope_head_dim=draw(st.integers(1, 32)), qk_nope_head_dim=draw(st.integers(1, 32)),
                   v_head_dim=draw(st.integers(1, 32)), n_routed_experts=e, num_experts_per_tok=draw(st.integers(1, e)),
                   n_shared_experts=draw(st.integers(0, 2)), moe_intermediate_size=draw(st.integers(1, 100)),
                   first_k_dense_replace=draw(st.integers(0, min(3, cfg["num_hidden_layers"] - 1))), topk_method=draw(st.sampled_from(["noaux_tc", "greedy"])))
    return cfg


@settings(max_examples=150, deadline=None)
@given(cfg=configs())
def test_active_never_exceeds_total_and_one_more_layer_adds_parameters(cfg):
    m = model_from_config(cfg)
    assert 0 < m.active_params <= m.params
    deeper = model_from_config({**cfg, "num_hidden_layers": cfg["num_hidden_layers"] + 1})
    assert deeper.params > m.params and deeper.active_params > m.active_params
    assert m.kv_bytes_per_token() > 0


@settings(max_examples=100, deadline=None)
@given(cfg=configs(st.sampled_from(["mixtral"])))
def test_one_expert_top_one_is_the_dense_model_plus_its_router(cfg):
    one = {**cfg, "num_local_experts": 1, "num_experts_per_tok": 1}
    moe = model_from_config(one)
    plain = {k: v for k, v in one.items() if k not in ("num_local_experts", "num_experts_per_tok")}
    dense = model_from_config({**plain, "model_type": "mistral"})
    router = cfg["hidden_size"] * cfg["num_hidden_layers"]  # one score per layer
    assert moe.params == moe.active_params == dense.params + router


@settings(max_examples=100, deadline=None)
@given(cfg=configs(st.sampled_from(["mixtral"])), k=st.integers(1, 8))
def test_active_parameters_grow_with_experts_per_token(cfg, k):
    cfg = {**cfg, "num_local_experts": 8, "num_experts_per_tok": k}
    m = model_from_config(cfg)
    per_expert = sum(lin.params for lin in m.expert_linears())
    assert m.params - m.active_params == cfg["num_hidden_layers"] * (8 - k) * per_expert


def test_deepseek_dense_layers_and_layer_frequency():
    m = model_from_config(_deepseek(first_k_dense_replace=2, num_hidden_layers=6, moe_layer_freq=2))
    assert [m.is_moe_layer(i) for i in range(6)] == [False, False, True, False, True, False]
    no_moe = model_from_config(_deepseek(n_routed_experts=None))
    assert no_moe.moe is None and no_moe.params == no_moe.active_params


def test_router_bias_only_for_noaux_routing():
    a = model_from_config(_deepseek(topk_method="noaux_tc"))
    b = model_from_config(_deepseek(topk_method="greedy"))
    assert a.params - b.params == 8 * 2  # 8 experts, two MoE layers


@pytest.mark.parametrize(
    "cfg, message",
    [
        (_mixtral(num_local_experts=None), "missing 'num_local_experts'"),
        (_mixtral(num_experts_per_tok=0), "'num_experts_per_tok' must be a positive integer"),
        (_mixtral(num_experts_per_tok=5), r"'num_experts_per_tok' \(5\) exceeds the number of experts \(4\)"),
        (_mixtral(num_local_experts="8"), "'num_local_experts' must be a positive integer, got '8'"),
        (_deepseek(kv_lora_rank=None), "missing 'kv_lora_rank'"),
        (_deepseek(qk_rope_head_dim=-64), "'qk_rope_head_dim' must be a positive integer"),
        (_deepseek(n_shared_experts=-1), "'n_shared_experts' must be an integer >= 0"),
        (_deepseek(moe_intermediate_size=2.5), "'moe_intermediate_size' must be a positive integer"),
        (_config(tie_word_embeddings="no"), "'tie_word_embeddings' must be true or false"),
        (_config(kv_lora_rank=512), "latent-attention fields"),
        (_config(model_type="qwen2", num_experts=8), "with experts is not supported"),
        (_config(model_type=None), "model_type None is not supported"),
    ],
)
def test_bad_configs_name_the_field(cfg, message):
    with pytest.raises(ValueError, match=message):
        model_from_config(cfg, "bad")


@pytest.mark.parametrize(
    "cfg, message",
    [
        # every layer dense: "8 of 256 experts per token" would describe layers that do not exist
        (_deepseek(first_k_dense_replace=3, num_hidden_layers=3), r"'first_k_dense_replace' \(3\) leaves no layer of the 3"),
        (_config(model_type=["llama"]), r"'model_type' must be a string such as \"llama\", got \['llama'\]"),
        (_config(model_type={"name": "llama"}), "'model_type' must be a string"),
        (_config(num_hidden_layers=10**400), "'num_hidden_layers' must be a positive integer \\(at most 2\\*\\*53\\), "
                                              "got an integer of 401 digits"),
    ],
)
def test_more_bad_configs_name_the_field(cfg, message):
    with pytest.raises(ValueError, match=message):
        model_from_config(cfg, "bad")


# --- the families beyond Llama: each count against the published one ------------------------------

@pytest.mark.parametrize("name, total, active, source", [
    # Keras Hub's Gemma presets (keras_hub/src/models/gemma/gemma_presets.py), "params"
    ("gemma-7b", 8_537_680_896, 8_537_680_896, "keras-hub gemma_7b_en"),
    ("gemma-2-9b", 9_241_705_984, 9_241_705_984, "keras-hub gemma2_9b_en"),
    ("gemma-3-1b", 999_885_952, 999_885_952, "keras-hub gemma3_1b"),
    # Qwen/Qwen3-8B model.safetensors.index.json: total_size 16,381,470,720 bytes of bf16
    ("qwen3-8b", 8_190_735_360, 8_190_735_360, "safetensors index / 2"),
    # Qwen/Qwen3-30B-A3B: 30.5B total, 3.3B activated (model card); exact from the checkpoint's tensors
    ("qwen3-30b-a3b", 30_532_122_624, 3_353_032_704, "checkpoint tensor count"),
    # Keras Hub's qwen1.5_moe_2.7b_en preset
    ("qwen1.5-moe-a2.7b", 14_315_784_192, 2_689_173_504, "keras-hub qwen1.5_moe_2.7b_en"),
    # Keras Hub's phi3_mini_4k_instruct_en preset
    ("phi-3-mini-4k", 3_821_079_552, 3_821_079_552, "keras-hub phi3_mini_4k_instruct_en"),
    # GPT-2 small as transformers counts GPT2LMHeadModel (head tied to wte)
    ("gpt2", 124_439_808, 124_439_808, "transformers num_parameters"),
    # Pythia's paper, Table 1 (Biderman et al., 2023): 162,322,944 with embeddings
    ("pythia-160m", 162_322_944, 162_322_944, "Pythia paper"),
])
def test_new_families_count_exactly(name, total, active, source):
    m = rl.load_model(name)
    assert (m.params, m.active_params) == (total, active), source


def test_gemma_ties_its_head_and_its_heads_are_wider_than_width_over_heads():
    m = rl.load_model("gemma-7b")
    assert m.tie_word_embeddings and m.lm_head_params == 0  # the config does not say; Gemma's default is tied
    assert m.head_dim == 256 != m.hidden_size // m.num_heads
    assert m.attention_width == 4096 > m.hidden_size
    assert [lin.out_features for lin in m.attention_linears()[:3]] == [4096, 4096, 4096]


def test_qwen3_and_gemma3_normalize_queries_and_keys():
    cfg = json.loads(resources.files("roofline").joinpath("data/models/qwen3-8b.json").read_text())
    with_norm = model_from_config(cfg)
    without = model_from_config({**cfg, "model_type": "qwen2"})  # same shape, qkv biases, no q/k norms
    assert with_norm.norm_params - without.norm_params == 36 * 2 * 128
    assert rl.load_model("gemma-3-1b").qk_norm and rl.load_model("gemma-2-9b").norms_per_layer == 4


def test_gpt2_and_neox_have_layernorm_biases_and_a_plain_mlp():
    g = rl.load_model("gpt2")
    assert [lin.name for lin in g.dense_mlp_linears()] == ["up_proj", "down_proj"]
    assert all(lin.bias for lin in g.layer_linears())
    assert g.norm_params == (2 * 12 + 1) * 2 * 768
    assert g.embedding_params == (50257 + 1024) * 768  # learned positions beside the tokens
    neox = rl.load_model("pythia-160m")
    assert neox.position_embeddings == 0 and not neox.tie_word_embeddings  # rotary, separate head


def test_local_layers_keep_only_their_window_of_kv_cache():
    m = rl.load_model("gemma-2-9b")
    assert m.sliding_layers == tuple(range(0, 42, 2)) and m.sliding_window == 4096
    per_layer = 2 * 8 * 256 * 2
    assert m.kv_cache_bytes(1000) == 1000 * m.kv_bytes_per_token()  # within the window every layer keeps all
    assert m.kv_cache_bytes(8192) == (21 * 8192 + 21 * 4096) * per_layer
    # a decode step reads what the cache holds, and local layers attend to their window only
    step = rl.decode_step(m, 1, 8192)
    assert step["kv_cache"].bytes == m.kv_cache_bytes(8192)
    assert step["attention"].flops == 4 * m.attention_width * (21 * 8192 + 21 * 4096)
    # Gemma 3: five local layers, then a global one
    g3 = rl.load_model("gemma-3-1b")
    assert g3.full_attention_layers == 4 and [i for i in range(26) if i not in g3.sliding_layers] == [5, 11, 17, 23]


def test_prefill_counts_the_window_band_exactly():
    m = rl.load_model("gemma-2-9b")
    p = rl.prefill(m, 8192, accounting="refined")
    w = 4096
    band = w * (w + 1) / 2 + (8192 - w) * w  # each of the last 4096 queries sees exactly 4096 keys
    assert p["attention"].flops == 4 * m.attention_width * (21 * 8192 * 8193 / 2 + 21 * band)


def test_qwen_moe_layers_and_shared_expert_gate():
    q2 = rl.load_model("qwen1.5-moe-a2.7b")
    assert q2.moe.shared_intermediate_size == 5632
    assert [lin.name for lin in q2.shared_expert_linears()][-1] == "shared_expert_gate"
    q3 = rl.load_model("qwen3-30b-a3b")
    assert q3.shared_expert_linears() == () and all(q3.is_moe_layer(i) for i in range(48))
    cfg = json.loads(resources.files("roofline").joinpath("data/models/qwen3-30b-a3b.json").read_text())
    sparse = model_from_config({**cfg, "decoder_sparse_step": 2, "mlp_only_layers": [1]})
    assert [sparse.is_moe_layer(i) for i in range(6)] == [False, False, False, True, False, True]
    with pytest.raises(ValueError, match="no layer of the 48 has experts"):
        model_from_config({**cfg, "mlp_only_layers": list(range(48))})


def test_unsupported_families_are_refused_with_the_supported_list():
    with pytest.raises(ValueError, match="model_type 'bert' is not supported yet; supported: deepseek_v2, .*gemma, gemma2, "
                                         "gemma3_text, gpt2, gpt_neox, .*phi3, qwen2, qwen2_moe, qwen3, qwen3_moe"):
        model_from_config({"model_type": "bert"})



@given(first=st.integers(0, 6), freq=st.integers(1, 4), offset=st.integers(0, 3), layers=st.integers(1, 40),
       dense=st.lists(st.integers(0, 45), max_size=5))
def test_expert_layers_are_counted_as_the_loop_would(first, freq, offset, layers, dense):
    moe = rl.core.model.MoE(8, 2, 16, first_dense_layers=first, layer_freq=freq, layer_offset=offset, dense_layers=tuple(dense))
    assert moe.moe_layers(layers) == sum(moe.is_moe_layer(i) for i in range(layers))


def test_a_moe_config_at_the_layer_cap_counts_its_parameters_in_closed_form():
    cfg = json.loads(resources.files("roofline").joinpath("data/models/qwen3-30b-a3b.json").read_text())
    most = roofline.core.model.MAX_LAYERS
    big = model_from_config({**cfg, "num_hidden_layers": most})
    small = rl.load_model("qwen3-30b-a3b")
    outside = small.embedding_params + small.lm_head_params + small.hidden_size  # embedding, head, final norm
    per_layer, remainder = divmod(small.params - outside, 48)
    assert remainder == 0 and big.params == outside + most * per_layer
    with pytest.raises(ValueError, match="'num_hidden_layers' must be at most 100,000"):
        model_from_config({**cfg, "num_hidden_layers": 10**12})


def test_gemma2_soft_capping_is_named_and_changes_no_count():
    m = rl.load_model("gemma-2-9b")
    assert (m.attention_softcap, m.final_softcap) == (50.0, 30.0)
    cfg = json.loads(resources.files("roofline").joinpath("data/models/gemma-2-9b.json").read_text())
    uncapped = model_from_config({**cfg, "attn_logit_softcapping": None, "final_logit_softcapping": None})
    assert uncapped.params == m.params and uncapped.attention_softcap is None
    with pytest.raises(ValueError, match="'attn_logit_softcapping' must be a positive number or null, got -1"):
        model_from_config({**cfg, "attn_logit_softcapping": -1})


def test_a_multimodal_config_points_to_its_text_model():
    text = json.loads(resources.files("roofline").joinpath("data/models/gemma-3-1b.json").read_text())
    wrapped = {"model_type": "gemma3", "text_config": text, "vision_config": {"model_type": "siglip_vision_model"}}
    with pytest.raises(ValueError, match=r"'gemma3' is a multimodal model .* \(model_type 'gemma3_text'\) is supported"):
        model_from_config(wrapped)
    assert model_from_config(wrapped["text_config"]).params == 999_885_952


def test_the_memory_cap_turns_a_runaway_allocation_into_an_error(memory_cap):
    with pytest.raises(MemoryError):
        with memory_cap(2**28):
            bytearray(2**30)
    bytearray(2**28)  # and it is lifted afterwards


def test_a_config_with_billions_of_layers_is_refused_before_anything_is_built(memory_cap):
    """Gemma 2 and Phi-3 keep a tuple of their sliding-window layers; 2**31 layers used to allocate about
    21.5 GB before any check. The layer count is bounded first."""
    for name, layers in (("gemma-2-9b", 2**31), ("phi-3-mini-4k", 10**9), ("llama-3-8b", 100_001)):
        base = json.loads(resources.files("roofline").joinpath(f"data/models/{name}.json").read_text())
        with memory_cap(2**28), pytest.raises(ValueError, match="'num_hidden_layers' must be at most 100,000"):
            model_from_config({**base, "num_hidden_layers": layers})


# Any change to a shipped config either loads a model whose counts and steps compute, or is refused
# with a ValueError or TypeError; never another exception, and never more than 1 GiB. The draws reach 2**60 on
# purpose (a hostile config); what loads is bounded where it enters (MAX_LAYERS, MAX_WIDTH, MAX_HEADS, MAX_VOCAB,
# MAX_EXPERTS, MAX_POSITIONS, MAX_PARAMS in roofline.core.model), so nothing built from a draw grows with it, and
# the memory cap below turns a regression into a failed example rather than a machine the OOM killer ends.
_FUZZ_KEYS = ["model_type", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
              "num_key_value_heads", "head_dim", "vocab_size", "tie_word_embeddings", "attention_bias", "mlp_bias",
              "max_position_embeddings", "num_local_experts", "num_experts_per_tok", "n_routed_experts", "num_experts",
              "moe_intermediate_size", "n_shared_experts", "first_k_dense_replace", "moe_layer_freq", "q_lora_rank",
              "kv_lora_rank", "sliding_window", "layer_types", "sliding_window_pattern", "use_sliding_window",
              "max_window_layers", "mlp_only_layers", "decoder_sparse_step", "shared_expert_intermediate_size",
              "n_embd", "n_head", "n_layer", "n_positions", "n_inner", "attn_logit_softcapping", "text_config"]
_FUZZ_VALUES = st.one_of(
    st.integers(-3, 70), st.integers(-2**60, 2**60), st.floats(allow_nan=True), st.text(max_size=5), st.booleans(),
    st.none(), st.lists(st.integers(-2, 50), max_size=4), st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
    st.sampled_from(sorted(rl.core.model.FAMILIES)),
    st.lists(st.sampled_from(["sliding_attention", "full_attention"]), max_size=60))


@settings(max_examples=300, deadline=None)
@given(name=st.sampled_from(sorted(SHIPPED)), changes=st.dictionaries(st.sampled_from(_FUZZ_KEYS), _FUZZ_VALUES, max_size=4))
def test_edited_configs_load_or_are_refused_cleanly(memory_cap, name, changes):
    base = json.loads(resources.files("roofline").joinpath(f"data/models/{name}.json").read_text())
    with memory_cap(2**30):  # a config that asks for more than 1 GiB fails here, not in the OOM killer
        try:
            m = model_from_config({**base, **changes})
        except (ValueError, TypeError):
            return
        assert 0 < m.active_params <= m.params
        # a window keeps at most every token: slots counted in exact integers, then the bytes they hold
        windowed = len(m.sliding_layers)
        kept = (m.num_layers - windowed) * 5000 + windowed * min(5000, m.sliding_window or 5000)
        assert kept <= m.num_layers * 5000
        assert m.kv_cache_bytes(5000) == pytest.approx(kept * m.kv_bytes_per_layer(), rel=1e-12)
        try:
            assert rl.decode_step(m, 1, 100).flops > 0 and rl.prefill(m, 16).flops > 0
        except NotModelledError:
            pass


@pytest.mark.parametrize("name", ["llama-3.1-8b", "llama-3.1-70b", "llama-3.3-70b"])
def test_llama_31_and_33_read_128k_tokens(name):
    """The serving tables of chapter 13 run Llama 3.1 and 3.3 at 20,000 input tokens, past Llama 3's 8,192."""
    assert rl.load_model(name).max_position_embeddings == 131_072
    assert rl.load_model(name.replace("3.1", "3").replace("3.3", "3")).max_position_embeddings == 8_192
