#!/usr/bin/env python3
"""Independent plain-PyTorch reference of moelab's model, for the C++ tests.

Usage: reference_model.py DIR

DIR holds what the C++ test wrote: config.json (model + MoE settings, batch
shape), params.json (name, shape) with one raw little-endian float64 file per
parameter under params/, tokens.bin and targets.bin (int64). This script
rebuilds the model from those weights in double precision, computes
loss = lm_loss + aux_loss + z_loss + mtp_loss, back-propagates, and writes
out.json (the four losses and each MTP depth's cross-entropy) and one float64 gradient file per parameter under grads/.

It shares no code with the C++ model and deliberately computes things another
way: attention head by head, MoE experts densely on every token with a gate
matrix that is zero for unselected or dropped assignments.
"""
import json
import math
import os
import sys

import numpy as np
import torch


def load_raw(path, shape, dtype):
    return torch.from_numpy(np.fromfile(path, dtype=dtype).reshape(shape))


def rms_norm(x, weight, eps):
    return x / torch.sqrt((x * x).mean(dim=-1, keepdim=True) + eps) * weight


def llama3_frequency(freq, sc):
    # Meta's Llama 3.1 apply_scaling, one frequency at a time.
    old_context = sc["original_seq_len"]
    wavelength = 2 * math.pi / freq
    if wavelength < old_context / sc["high_freq_factor"]:
        return freq
    if wavelength > old_context / sc["low_freq_factor"]:
        return freq / sc["factor"]
    smooth = ((old_context / wavelength - sc["low_freq_factor"])
              / (sc["high_freq_factor"] - sc["low_freq_factor"]))
    return (1 - smooth) * freq / sc["factor"] + smooth * freq


def yarn_frequencies(freqs, hd, theta, sc):
    # YaRN (Peng et al. 2023): pair i interpolates (freq / factor) below the
    # dimension that turns beta_slow times in the original context, keeps its
    # frequency above the one that turns beta_fast times, and ramps linearly
    # in between.
    def dim_turning(turns):
        # Solve original_seq_len * theta^(-2d/hd) = turns * 2 pi for d.
        return hd * math.log(sc["original_seq_len"] / (turns * 2 * math.pi)) / (2 * math.log(theta))
    lo, hi = dim_turning(sc["beta_fast"]), dim_turning(sc["beta_slow"])
    if sc["truncate"]:
        lo, hi = math.floor(lo), math.ceil(hi)
    lo, hi = max(lo, 0), min(hi, hd - 1)
    if lo == hi:
        hi += 0.001
    out = []
    for i, freq in enumerate(freqs):
        interpolated = min(max((i - lo) / (hi - lo), 0.0), 1.0)
        out.append(freq * (1 - interpolated) + freq / sc["factor"] * interpolated)
    return out


def yarn_attention_factor(sc):
    def mscale(scale, m):
        return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0
    if sc["attention_factor"] > 0:
        return sc["attention_factor"]
    if sc["mscale"] > 0 and sc["mscale_all_dim"] > 0:
        return mscale(sc["factor"], sc["mscale"]) / mscale(sc["factor"], sc["mscale_all_dim"])
    return mscale(sc["factor"], 1.0)


def rope_frequencies(hd, theta, sc):
    """Pair i's angle per position, and the factor the rotated q and k are scaled by."""
    freqs = [theta ** (-2.0 * i / hd) for i in range(hd // 2)]
    if sc["type"] == "llama3":
        return [llama3_frequency(f, sc) for f in freqs], 1.0
    if sc["type"] == "yarn":
        return yarn_frequencies(freqs, hd, theta, sc), yarn_attention_factor(sc)
    assert sc["type"] == "none", sc["type"]
    return freqs, 1.0


def rope(x, freqs, scale):
    # x: [S, hd]. Pair (i, i + hd/2) rotates by position * freqs[i], then times scale.
    seq, hd = x.shape
    half = hd // 2
    pos = torch.arange(seq, dtype=torch.float64)[:, None]
    ang = pos * torch.tensor(freqs, dtype=torch.float64)[None, :]
    c, s = torch.cos(ang), torch.sin(ang)
    a, b = x[:, :half], x[:, half:]
    return scale * torch.cat([a * c - b * s, b * c + a * s], dim=1)


def attention(x, p, prefix, cfg):
    # x: [S, d] one sequence.
    n_heads, n_kv = cfg["n_heads"], cfg["n_kv_heads"]
    hd = cfg["head_dim"] or cfg["d_model"] // n_heads
    q = x @ p[prefix + "wq"].T
    k = x @ p[prefix + "wk"].T
    v = x @ p[prefix + "wv"].T
    if cfg["qkv_bias"]:  # Qwen2
        q, k, v = q + p[prefix + "bq"], k + p[prefix + "bk"], v + p[prefix + "bv"]
    freqs, scale = rope_frequencies(hd, cfg["rope_theta"], cfg["rope_scaling"])
    eps = cfg["norm_eps"]
    if cfg["qk_norm"] == "full":  # OLMoE: over the whole projection
        q = rms_norm(q, p[prefix + "q_norm.weight"], eps)
        k = rms_norm(k, p[prefix + "k_norm.weight"], eps)
    seq = x.shape[0]
    mask = torch.triu(torch.ones(seq, seq, dtype=torch.bool), diagonal=1)
    heads = []
    for h in range(n_heads):
        kv = h // (n_heads // n_kv)
        qh, kh = q[:, h * hd:(h + 1) * hd], k[:, kv * hd:(kv + 1) * hd]
        if cfg["qk_norm"] == "head":  # Qwen3: each head on its own, one weight for all heads
            qh = rms_norm(qh, p[prefix + "q_norm.weight"], eps)
            kh = rms_norm(kh, p[prefix + "k_norm.weight"], eps)
        qh = rope(qh, freqs, scale)
        kh = rope(kh, freqs, scale)
        vh = v[:, kv * hd:(kv + 1) * hd]
        scores = (qh @ kh.T) / math.sqrt(hd)
        scores = scores.masked_fill(mask, float("-inf"))
        heads.append(torch.softmax(scores, dim=-1) @ vh)
    return torch.cat(heads, dim=1) @ p[prefix + "wo"].T


def latent_softmax_scale(cfg):
    # DeepSeek: 1/sqrt(query/key head width), times YaRN's mscale(factor,
    # mscale_all_dim) squared when it is set.
    scale = 1.0 / math.sqrt(cfg["qk_nope_head_dim"] + cfg["qk_rope_head_dim"])
    sc = cfg["rope_scaling"]
    if sc["type"] == "yarn" and sc["mscale_all_dim"] > 0 and sc["factor"] > 1:
        scale *= (0.1 * sc["mscale_all_dim"] * math.log(sc["factor"]) + 1.0) ** 2
    return scale


def latent_attention(x, p, prefix, cfg):
    # DeepSeek-V2/V3 multi-head latent attention on one sequence x: [S, d], head
    # by head, each score the sum of its no-RoPE and RoPE parts' products.
    n_heads, eps = cfg["n_heads"], cfg["norm_eps"]
    nope, rot, vd = cfg["qk_nope_head_dim"], cfg["qk_rope_head_dim"], cfg["v_head_dim"]
    rank = cfg["kv_lora_rank"]
    if cfg["q_lora_rank"] > 0:
        q_latent = rms_norm(x @ p[prefix + "wq_a"].T, p[prefix + "q_a_norm.weight"], eps)
        q = q_latent @ p[prefix + "wq_b"].T
    else:
        q = x @ p[prefix + "wq"].T
    kv_a = x @ p[prefix + "wkv_a"].T
    kv = rms_norm(kv_a[:, :rank], p[prefix + "kv_a_norm.weight"], eps) @ p[prefix + "wkv_b"].T
    freqs, factor = rope_frequencies(rot, cfg["rope_theta"], cfg["rope_scaling"])
    k_rot = rope(kv_a[:, rank:], freqs, factor)  # one for all heads
    seq = x.shape[0]
    mask = torch.triu(torch.ones(seq, seq, dtype=torch.bool), diagonal=1)
    heads = []
    for h in range(n_heads):
        qh = q[:, h * (nope + rot):(h + 1) * (nope + rot)]
        kvh = kv[:, h * (nope + vd):(h + 1) * (nope + vd)]
        scores = qh[:, :nope] @ kvh[:, :nope].T + rope(qh[:, nope:], freqs, factor) @ k_rot.T
        scores = (scores * latent_softmax_scale(cfg)).masked_fill(mask, float("-inf"))
        heads.append(torch.softmax(scores, dim=-1) @ kvh[:, nope:])
    return torch.cat(heads, dim=1) @ p[prefix + "wo"].T


def swiglu(x, w1, w2, w3):
    return (torch.nn.functional.silu(x @ w1.T) * (x @ w3.T)) @ w2.T


def moe(x, p, prefix, cfg):
    # x: [T, d], T = batch * seq tokens. Returns (y, aux, z).
    m = cfg["moe"]
    n_exp, k = m["num_experts"], m["top_k"]
    tokens = x.shape[0]
    logits = x @ p[prefix + "router.weight"].T
    if m["score"] == "sigmoid":  # DeepSeek-V3: an affinity per expert, normalised for balancing
        scores = torch.sigmoid(logits)
        probs = scores / scores.sum(dim=-1, keepdim=True)
        choice = scores.detach()
    else:
        scores = probs = torch.softmax(logits, dim=-1)
        choice = logits.detach()
    # An "aux_free" routing bias steers the choice only, never the gates.
    if prefix + "router.bias" in p:
        choice = choice + p[prefix + "router.bias"].detach()
    if m["topk_groups"] < m["n_groups"]:
        affinity = choice if m["score"] == "sigmoid" else torch.softmax(choice, dim=-1)
        choice = limit_to_best_groups(choice, affinity, m)
    top_idx = torch.topk(choice, k, dim=-1).indices
    top_scores = torch.gather(scores, 1, top_idx)
    if m["gate"] == "topk_softmax":  # the chosen scores, normalised over the k
        gates = top_scores / top_scores.sum(dim=-1, keepdim=True)
    elif m["gate"] == "full_softmax":  # the selected experts' scores, not re-normalised
        gates = top_scores
    else:
        raise ValueError("unknown gate " + m["gate"])
    gates = gates * m["route_scale"]
    # Admission order: token order, or by descending router probability.
    assignments = [(t, slot) for t in range(tokens) for slot in range(k)]
    if m["drop_policy"] == "score":
        assignments.sort(key=lambda a: -float(probs[a[0], top_idx[a[0], a[1]]]))
    capacity = None
    if m["capacity_factor"] > 0:
        capacity = math.ceil(m["capacity_factor"] * tokens * k / n_exp)
    used = [0] * n_exp
    kept = set()
    for t, slot in assignments:
        e = int(top_idx[t, slot])
        used[e] += 1
        if capacity is None or used[e] <= capacity:
            kept.add((t, slot))
    rows = []
    for t in range(tokens):
        row = [torch.zeros((), dtype=x.dtype) for _ in range(n_exp)]
        for slot in range(k):
            if (t, slot) in kept:
                e = int(top_idx[t, slot])
                row[e] = row[e] + gates[t, slot]
        rows.append(torch.stack(row))
    gate_matrix = torch.stack(rows)  # [T, E], zero where not routed or dropped
    y = torch.zeros_like(x)
    for e in range(n_exp):
        ep = "%sexperts.%d." % (prefix, e)
        y = y + gate_matrix[:, e:e + 1] * swiglu(x, p[ep + "w1"], p[ep + "w2"], p[ep + "w3"])
    if m["shared_width"] > 0:
        sp = prefix + "shared."
        shared = swiglu(x, p[sp + "w1"], p[sp + "w2"], p[sp + "w3"])
        if m["shared_expert_gate"]:  # Qwen2-MoE: a sigmoid gate per token
            shared = torch.sigmoid(x @ p[prefix + "shared_gate"].T) * shared
        y = y + shared
    aux = switch_loss(top_idx, probs, m["aux_loss_coef"], n_exp, k)
    if m["balance"] == "sequence":
        seq = cfg["seq"]
        per_sequence = [switch_loss(top_idx[b:b + seq], probs[b:b + seq], m["aux_loss_coef"],
                                    n_exp, k) for b in range(0, tokens, seq)]
        aux = torch.stack(per_sequence).mean()
    elif m["balance"] in ("none", "aux_free"):
        aux = torch.zeros((), dtype=x.dtype)
    z = m["z_loss_coef"] * (torch.logsumexp(logits, dim=-1) ** 2).mean()
    return y, aux, z


def limit_to_best_groups(choice, affinity, m):
    # DeepSeek-V2/V3: each token keeps the experts of its topk_groups best groups
    # (consecutive ids), each group scored by its best affinity or its best two's
    # sum; the others can no longer be chosen.
    per_group = choice.shape[1] // m["n_groups"]
    limited = torch.full_like(choice, float("-inf"))
    for t in range(choice.shape[0]):
        scores = []
        for g in range(m["n_groups"]):
            members = sorted(affinity[t, g * per_group:(g + 1) * per_group].tolist(), reverse=True)
            scores.append(members[0] if m["group_score"] == "max" else members[0] + members[1])
        best = sorted(range(m["n_groups"]), key=lambda g: -scores[g])[:m["topk_groups"]]
        for g in best:
            limited[t, g * per_group:(g + 1) * per_group] = choice[t, g * per_group:(g + 1) * per_group]
    return limited


def switch_loss(top_idx, probs, coef, n_exp, k):
    # coef * E * sum_i f_i P_i over these tokens (f counts the router's choices).
    counts = torch.zeros(n_exp, dtype=probs.dtype)
    for e in top_idx.reshape(-1).tolist():
        counts[e] += 1
    f = counts / (top_idx.shape[0] * k)
    return coef * n_exp * (f * probs.mean(dim=0)).sum()


def block(h, p, pre, cfg, is_moe):
    # One pre-norm block on h [B, S, d]: (h, aux, z).
    batch, seq = h.shape[0], h.shape[1]
    eps = cfg["norm_eps"]
    a = rms_norm(h, p[pre + "attn_norm.weight"], eps)
    attend = latent_attention if cfg["attention"] == "mla" else attention
    h = h + torch.stack([attend(a[b], p, pre + "attn.", cfg) for b in range(batch)])
    f_in = rms_norm(h, p[pre + "ffn_norm.weight"], eps)
    if is_moe:
        y, aux, z = moe(f_in.reshape(batch * seq, -1), p, pre + "moe.", cfg)
        return h + y.reshape(batch, seq, -1), aux, z
    fp = pre + "ffn."
    zero = torch.zeros((), dtype=torch.float64)
    return h + swiglu(f_in, p[fp + "w1"], p[fp + "w2"], p[fp + "w3"]), zero, zero


def token_nll(h, p, cfg, goal):
    # [B, S] negative log-likelihoods of goal under the final norm and head.
    head = p["embedding"] if cfg["tie_embeddings"] else p["head"]
    logits = rms_norm(h, p["final_norm.weight"], cfg["norm_eps"]) @ head.T
    return -torch.log_softmax(logits, dim=-1).gather(2, goal[:, :, None])[:, :, 0]


def multi_token_prediction(h, p, cfg, targets):
    # DeepSeek-V3's MTP, the other way round from moelab's shrinking windows
    # (as Megatron-Core does it): every depth keeps the whole window with its
    # tokens rolled one more place left, and the last k positions, which have
    # no target, are masked out of the mean. Returns each depth's mean CE.
    seq = targets.shape[1]
    ces = []
    for k in range(1, cfg["mtp"]["depth"] + 1):
        pre = "mtp.%d." % (k - 1)
        incoming = torch.roll(targets, -(k - 1), dims=1)  # position i: t_{i+k}
        e = rms_norm(p["embedding"][incoming], p[pre + "enorm.weight"], cfg["norm_eps"])
        hn = rms_norm(h, p[pre + "hnorm.weight"], cfg["norm_eps"])
        h, _, _ = block(torch.cat([e, hn], dim=-1) @ p[pre + "proj"].T, p, pre + "block.", cfg,
                        False)
        nll = token_nll(h, p, cfg, torch.roll(targets, -k, dims=1))
        has_target = torch.arange(seq) < seq - k
        ces.append(nll[:, has_target].mean())
    return ces


def forward(p, cfg, tokens, targets):
    aux_total = torch.zeros((), dtype=torch.float64)
    z_total = torch.zeros((), dtype=torch.float64)
    h = p["embedding"][tokens]  # [B, S, d]
    m = cfg["moe"]
    for layer in range(cfg["n_layers"]):
        is_moe = (m["enabled"] and layer >= m["first_dense_layers"]
                  and (layer - m["first_dense_layers"] + 1) % m["layer_interval"] == 0)
        h, aux, z = block(h, p, "layers.%d." % layer, cfg, is_moe)
        aux_total = aux_total + aux
        z_total = z_total + z
    lm = token_nll(h, p, cfg, targets).mean()
    return lm, aux_total, z_total, multi_token_prediction(h, p, cfg, targets)


def main():
    out_dir = sys.argv[1]
    with open(os.path.join(out_dir, "config.json")) as fh:
        cfg = json.load(fh)
    with open(os.path.join(out_dir, "params.json")) as fh:
        shapes = json.load(fh)
    params = {}
    for name, shape in shapes.items():
        params[name] = load_raw(os.path.join(out_dir, "params", name), shape, np.float64)
        params[name].requires_grad_(True)
    shape = (cfg["batch"], cfg["seq"])
    tokens = load_raw(os.path.join(out_dir, "tokens.bin"), shape, np.int64)
    targets = load_raw(os.path.join(out_dir, "targets.bin"), shape, np.int64)
    lm, aux, z, mtp_ce = forward(params, cfg, tokens, targets)
    mtp = torch.zeros((), dtype=torch.float64)
    if mtp_ce:
        mtp = cfg["mtp"]["loss_weight"] / len(mtp_ce) * torch.stack(mtp_ce).sum()
    (lm + aux + z + mtp).backward()
    os.makedirs(os.path.join(out_dir, "grads"), exist_ok=True)
    for name, tensor in params.items():
        grad = tensor.grad if tensor.grad is not None else torch.zeros_like(tensor)
        grad.detach().numpy().astype(np.float64).tofile(os.path.join(out_dir, "grads", name))
    with open(os.path.join(out_dir, "out.json"), "w") as fh:
        json.dump({"lm_loss": lm.item(), "aux_loss": aux.item(), "z_loss": z.item(),
                   "mtp_loss": mtp.item(), "mtp_ce": [ce.item() for ce in mtp_ce]}, fh)


if __name__ == "__main__":
    main()
