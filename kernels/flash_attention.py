"""Causal / sliding-window / GQA flash attention ``out = softmax(scale · Q·Kᵀ + mask) · V`` (prefill).

The online-softmax algorithm of nki-library's ``attention_cte`` kernel, re-derived for nkic:

* 128 query rows (a *Q group*) sit on the partitions; Qᵀ ``[d, q]`` and Kᵀ ``[d, k]`` come from HBM by
  ``dma_transpose``, V ``[kv, d]`` by ``dma_copy``. K and V come in 512-column *KV tiles*; GQA query batch ``b``
  reads KV batch ``b // (bs // bs_kv)``, whose K/V tiles are loaded once for all its query batches.
* MM1 ``S = Q·Kᵀ = nc_matmul(stationary=Qᵀ, moving=Kᵀ)`` lands in one PSUM bank per KV tile; tiles wholly above
  the diagonal (or wholly outside the sliding window) are skipped at trace time; the tiles straddling a boundary
  are copied to SBUF and masked by ``affine_select`` (iota triangle ``q - k >= 0``; window ``(W - 1) - (q - k) >= 0``)
  with FLOAT32_MIN.
* ``tensor_scalar_reduce`` multiplies by ``scale`` and yields each tile's partial row max; ``tensor_reduce(maximum,
  negate=True)`` folds them into the *negated* section max. Across KV sections the negated running max is updated by
  ``tensor_tensor(minimum)`` and the rescale ``α = exp(m_old - m_new)`` is one ``activation(exp, data=-m_old,
  scale=-1, bias=-m_new)``.
* ``exp(S - m)`` and its row sum are ONE ``activation(exp, bias=-m, reduce_op=add)``; the exp tile is transposed on
  the PE (``nc_transpose`` → PSUM → copy) so KV lands on the partitions and MM2 ``O = nc_matmul(stationary=Pᵀ,
  moving=V)`` accumulates the 128-row KV blocks of a section in one PSUM bank (blocks whose exp is all zero —
  above the diagonal or outside the window — are skipped too).
* When ``seqlen_kv > 10240`` KV is processed in 8192-wide *sections*: ``l = α·l + l_section`` (``tensor_scalar``)
  and ``O = α·O_prev + O_section`` (``scalar_tensor_tensor``), the partial O round-tripping through an HBM scratch
  tensor while the running max and sum stay in SBUF.
* Finally ``reciprocal(l)`` and ``activation(copy, scale=1/l)``; the store DMA casts to q's dtype.

Every skip / diagonal / ragged decision is a Python-level (trace-time) choice, so those loops are plain ``range``;
the uniform K/V loads are ``nl.affine_range`` loops.

That is ``flash_attention_rolled`` (in program order, one group after the other). ``flash_attention`` runs the same
algorithm software-pipelined for the engines (``_attention_pipelined``, below): private buffers per group and tile,
the next ``PIPELINE_DEPTH`` groups' scores stages emitted before this group's softmax stage, each diagonal tile cut
after its last block with a kept key, the exp over chunks of tiles, Pᵀ through bf16 PSUM or by DMA, and some
tiles' max folded on GpSimd, the masked tiles scaled by ScalarE out of PSUM. The numbers are the same up to the
order of the partial sums.
"""

from nkic import api as nki

nl = nki.language
nisa = nki.isa

Q_GROUP = 128  # query rows per group (the partitions)
KV_TILE = 512  # MM1 free size: one fp32 PSUM bank
KV_BLOCK = 128  # MM2 contraction block (the partitions of the transposed exp tile)
BLOCKS = KV_TILE // KV_BLOCK
SECTION_THRESHOLD = 10 * 1024  # above this many KV positions, process KV in sections ...
SECTION_SIZE = 8 * 1024  # ... of this many positions
FLOAT32_MIN = -3.4028235e38
# The section of flash_attention_rolled's uniform causal form: its diagonal band's body holds 4·section/512 group
# bodies, its other loops run over section-wide KV, and sections are merged through HBM. Measured at 8K rolled: 4096
# is faster than 2048 (fewer, longer group iterations, each ending at a barrier), with a larger band body
# (bench/README.md)
ROLLED_SECTION = 4096


def _cdiv(a, b):
    return -(-a // b)


def _running_max(run_neg_max, partial_max, nq, n_kept, first):
    """The section's negated row max folded into the running one (``run_neg_max``, updated in place) and, after
    the first section, α = exp(m_old - m_new) = exp(-(-m_old) + (-m_new)) for rescaling; returns (neg_max, α)."""
    f32 = nl.float32
    neg_max = run_neg_max[:nq]
    if first:
        nisa.tensor_reduce(dst=neg_max, op=nl.maximum, data=partial_max[:nq, :n_kept], axis=1, negate=True)
        return neg_max, None
    sec_neg_max = nl.ndarray((Q_GROUP, 1), dtype=f32, buffer=nl.sbuf, name="sec_neg_max")
    nisa.tensor_reduce(dst=sec_neg_max[:nq], op=nl.maximum, data=partial_max[:nq, :n_kept], axis=1, negate=True)
    prev_neg_max = nl.ndarray((Q_GROUP, 1), dtype=f32, buffer=nl.sbuf, name="prev_neg_max")
    nisa.tensor_copy(dst=prev_neg_max[:nq], src=neg_max)
    nisa.tensor_tensor(dst=neg_max, data1=prev_neg_max[:nq], data2=sec_neg_max[:nq], op=nl.minimum)
    alpha = nl.ndarray((Q_GROUP, 1), dtype=f32, buffer=nl.sbuf, name="alpha")
    nisa.activation(dst=alpha[:nq], op=nl.exp, data=prev_neg_max[:nq], bias=neg_max, scale=-1.0)
    return neg_max, alpha


def _section_plan(n_groups, seqlen_q, sections, causal, window):
    """Per (group, section): the kept KV tiles ``(t, k0, nk, kind)``; per group: the sections with any compute."""
    plan = {}
    for g in range(n_groups):
        q0, nq = g * Q_GROUP, min(Q_GROUP, seqlen_q - g * Q_GROUP)
        for si, (s0, slen) in enumerate(sections):
            tiles = []
            for t in range(_cdiv(slen, KV_TILE)):
                k0, nk = s0 + t * KV_TILE, min(KV_TILE, slen - t * KV_TILE)
                kind = _tile_kind(q0, nq, k0, nk, causal, window)
                if kind is not None:
                    tiles.append((t, k0, nk, kind))
            plan[g, si] = tiles
    active = {g: [si for si in range(len(sections)) if plan[g, si]] for g in range(n_groups)}
    assert all(active.values()), "every query group must see at least one key"
    return plan, active


def _tile_kind(q0, nq, k0, nk, causal, window):
    """Trace-time classification of the (q group, KV tile) pair: None (skip) or the masks it needs."""
    q_last, k_last = q0 + nq - 1, k0 + nk - 1
    if causal and k0 > q_last:
        return None  # wholly above the diagonal
    if window > 0 and q0 - k_last >= window:
        return None  # wholly outside the sliding window
    return {"causal": causal and k_last > q0, "window": window if window > 0 and q_last - k0 >= window else 0}


def _kept_blocks(q0, nq, k0, nk, kind):
    """The 128-row KV blocks of a kept tile that hold any unmasked score (a contiguous range)."""
    kept = []
    for i in range(_cdiv(nk, KV_BLOCK)):
        b0 = k0 + i * KV_BLOCK
        b_last = min(k0 + nk, b0 + KV_BLOCK) - 1
        if kind["causal"] and b0 > q0 + nq - 1:
            continue
        if kind["window"] and q0 - b_last >= kind["window"]:
            continue
        kept.append(i)
    return kept


@nki.jit
def flash_attention(q, k, v, scale=1.0, causal_mask=True, sliding_window=0):
    return _attention_pipelined(q, k, v, scale, causal_mask, sliding_window)


@nki.jit
def flash_attention_rolled(q, k, v, scale=1.0, causal_mask=True, sliding_window=0, unroll_tiles=True):
    """``flash_attention`` written for a compiler that keeps loops rolled: the program grows as O(S) instead of
    O(S²). The same numbers in another summation order.

    Causal attention whose seqlen is a multiple of the section size (no window, seqlen_q == seqlen_kv) is written
    as loops with constant bounds (``_uniform_causal``): a loop over query groups per KV section, a loop over the
    sections for the diagonal band, and inside them loops over KV tiles: with ``unroll_tiles`` (the default)
    ``nl.static_range`` (each group's tiles unrolled, so they pipeline across the engines; at 64K the program is
    hardly larger), else ``nl.affine_range`` (rolled too, nested in the group loops: the smallest program, and the
    slowest). Other shapes keep the first form: the unmasked KV tiles of each (Q group, section) in an
    ``nl.affine_range`` loop, the masked tiles first, as plain Python loops."""
    return _attention(q, k, v, scale, causal_mask, sliding_window, rolled=True, unroll_tiles=unroll_tiles)


def _problem(q, k, v, causal_mask, sliding_window):
    """Both kernels' argument checks and sizes, and the output tensor:
    (bs, bs_kv, seqlen_q, seqlen_kv, d, causal, window, out)."""
    bs, seqlen_q, d = q.shape
    bs_kv, seqlen_kv, d_kv = k.shape
    assert v.shape == k.shape and d_kv == d, "k and v must be (bs_kv, seqlen_kv, d) like q's d"
    assert d <= 128, "head dim must be at most 128"
    assert bs % bs_kv == 0, "bs must be a multiple of bs_kv (GQA)"
    out = nl.ndarray((bs, seqlen_q, d), dtype=q.dtype, buffer=nl.shared_hbm, name="out")
    return bs, bs_kv, seqlen_q, seqlen_kv, d, bool(causal_mask), int(sliding_window or 0), out


def _sectioning(bs, seqlen_q, seqlen_kv, d, scale, causal, window):
    """The KV sections, the masked value, each group's per-section plan and the HBM scratch of partial outputs
    (None when no group spans two sections): (n_groups, sections, on_false, plan, active, scratch)."""
    n_groups = _cdiv(seqlen_q, Q_GROUP)
    sec_size = SECTION_SIZE if seqlen_kv > SECTION_THRESHOLD else seqlen_kv
    sections = [(s0, min(sec_size, seqlen_kv - s0)) for s0 in range(0, seqlen_kv, sec_size)]
    # The masked value: FLOAT32_MIN, divided by scale when scale > 1 so that ×scale stays finite (a row with no key
    # in a section would otherwise get max = -inf and exp(-inf + inf) = NaN).
    on_false = FLOAT32_MIN / max(1.0, float(scale))
    plan, active = _section_plan(n_groups, seqlen_q, sections, causal, window)
    scratch = None
    if any(len(a) > 1 for a in active.values()):
        scratch = nl.ndarray((bs, seqlen_q, d), dtype=nl.float32, buffer=nl.hbm, name="o_partial")
    return n_groups, sections, on_false, plan, active, scratch


def _attention(q, k, v, scale, causal_mask, sliding_window, rolled, unroll_tiles=False):
    bs, bs_kv, seqlen_q, seqlen_kv, d, causal, window, out = _problem(q, k, v, causal_mask, sliding_window)
    dt = q.dtype
    f32 = nl.float32
    q_per_kv = bs // bs_kv
    uniform = min(seqlen_kv, ROLLED_SECTION)
    if rolled and causal and not window and seqlen_q == seqlen_kv and seqlen_kv % uniform == 0 \
            and uniform % KV_TILE == 0:
        return _uniform_causal(q, k, v, out, uniform, scale, nl.static_range if unroll_tiles else nl.affine_range)
    n_groups, sections, on_false, plan, active, scratch = _sectioning(bs, seqlen_q, seqlen_kv, d, scale, causal, window)

    for kb in range(bs_kv):
        batches = range(kb * q_per_kv, (kb + 1) * q_per_kv)
        # running statistics (negated max, exp sum) of every group of every query batch reading this KV batch,
        # resident in SBUF across the sections; one (128, 1) tile each keeps the groups independent
        run_neg_max = {}
        run_sum = {}
        for b in batches:
            for g in range(n_groups):
                run_neg_max[b, g] = nl.ndarray((Q_GROUP, 1), dtype=f32, buffer=nl.sbuf, name=f"neg_max_b{b}_g{g}")
                run_sum[b, g] = nl.ndarray((Q_GROUP, 1), dtype=f32, buffer=nl.sbuf, name=f"sum_b{b}_g{g}")

        for si, (s0, slen) in enumerate(sections):
            n_tiles = _cdiv(slen, KV_TILE)
            n_blocks = _cdiv(slen, KV_BLOCK)
            needed = [any(t == kt[0] for g in range(n_groups) for kt in plan[g, si]) for t in range(n_tiles)]
            if not any(needed):
                continue
            # -- K (transposed, d on partitions) and V (KV on partitions) of the section --------------------
            k_t = nl.ndarray((d, slen), dtype=dt, buffer=nl.sbuf, name="kT")
            v_sb = nl.ndarray((KV_BLOCK, n_blocks, d), dtype=dt, buffer=nl.sbuf, name="v")
            _load_kv(k, v, k_t, v_sb, kb, s0, slen, seqlen_kv, d, needed)

            for b in batches:
                # Qᵀ [d, q] of every group that computes in this section, by transposing DMAs issued up front (the
                # SP queue is in order: a load behind a group's output store would wait for that group)
                groups = [g for g in range(n_groups) if si in active[g]]
                if rolled:  # one group's Qᵀ at a time: all of them (128 KiB per partition at 64K) do not fit
                    q_t = None
                else:
                    q_t = nl.ndarray((d, n_groups, Q_GROUP), dtype=dt, buffer=nl.sbuf, name="qT")
                    for g in groups:
                        q0, nq = g * Q_GROUP, min(Q_GROUP, seqlen_q - g * Q_GROUP)
                        nisa.dma_transpose(dst=q_t[:, g, :nq], src=q[b, q0 : q0 + nq, :])
                for g in groups:
                    if rolled:
                        q0, nq = g * Q_GROUP, min(Q_GROUP, seqlen_q - g * Q_GROUP)
                        q_g = nl.ndarray((d, Q_GROUP), dtype=dt, buffer=nl.sbuf, name="qT_group")
                        nisa.dma_transpose(dst=q_g[:, :nq], src=q[b, q0 : q0 + nq, :])
                    else:
                        q_g = q_t[:, g, :]
                    _group_section(
                        q_g, out, scratch, k_t, v_sb, run_neg_max[b, g], run_sum[b, g], b, g, si, s0, slen,
                        plan[g, si], active[g], seqlen_q, d, dt, scale, on_false, window, rolled,
                    )  # fmt: skip
    return out


def _load_kv(k, v, k_t, v_sb, kb, s0, slen, seqlen_kv, d, needed):
    """DMA the section's Kᵀ tiles ``[d, 512]`` and V blocks ``[128, d]`` (only tiles some group uses)."""
    base = kb * seqlen_kv * d + s0 * d
    n_full = slen // KV_TILE
    if all(needed[:n_full]):
        for t in nl.affine_range(n_full):
            k0 = t * KV_TILE
            nisa.dma_transpose(dst=k_t[:, k0 : k0 + KV_TILE], src=k[kb, s0 + k0 : s0 + k0 + KV_TILE, :])
            nisa.dma_copy(
                dst=v_sb[:, t * BLOCKS : (t + 1) * BLOCKS, :],
                src=v.ap(pattern=[[d, KV_BLOCK], [KV_BLOCK * d, BLOCKS], [1, d]], offset=base + k0 * d),
            )
        first = n_full
    else:
        first = 0
    for t in range(first, _cdiv(slen, KV_TILE)):
        if not needed[t]:
            continue
        _load_kv_tile(k, v, k_t, v_sb, kb, s0, slen, d, base, t)


def _group_section(
    q_t, out, scratch, k_t, v_sb, run_neg_max, run_sum, b, g, si, s0, slen, tiles, active, seqlen_q, d, dt, scale,
    on_false, window, rolled=False,
):  # fmt: skip
    """One Q group against one KV section: MM1 + mask + max, running max, exp + sum, transpose, MM2, merge."""
    f32 = nl.float32
    q0, nq = g * Q_GROUP, min(Q_GROUP, seqlen_q - g * Q_GROUP)
    first, last = si == active[0], si == active[-1]
    n_kept = len(tiles)
    run = []  # (first tile, first column j, count) of the uniform tiles looped over with affine_range
    if rolled:
        tiles, run = _uniform_run(tiles)

    # -- MM1, mask, scale + partial row max per KV tile ------------------------------------------------------
    scores = nl.ndarray((Q_GROUP, slen), dtype=f32, buffer=nl.sbuf, name="scores")
    partial_max = nl.ndarray((Q_GROUP, n_kept), dtype=f32, buffer=nl.sbuf, name="partial_max")
    for j, (t, k0, nk, kind) in enumerate(tiles):
        c0 = k0 - s0
        s_psum = nl.ndarray((Q_GROUP, KV_TILE), dtype=f32, buffer=nl.psum, name="qk_psum")
        nisa.nc_matmul(s_psum[:nq, :nk], stationary=q_t[:, :nq], moving=k_t[:, c0 : c0 + nk])
        s_tile = scores[:nq, c0 : c0 + nk]
        src = s_psum[:nq, :nk]
        if kind["causal"] or kind["window"]:
            nisa.tensor_copy(dst=s_tile, src=src)
            src = s_tile
        if kind["causal"]:
            # keep q - k >= 0: channel (q0 + p) - free (k0 + i)
            nisa.affine_select(
                dst=s_tile, pattern=[[-1, nk]], channel_multiplier=1, on_true_tile=s_tile,
                on_false_value=on_false, cmp_op=nl.greater_equal, offset=q0 - k0,
            )  # fmt: skip
        if kind["window"]:
            # keep q - k < W, i.e. (W - 1) - (q0 + p) + (k0 + i) >= 0
            nisa.affine_select(
                dst=s_tile, pattern=[[1, nk]], channel_multiplier=-1, on_true_tile=s_tile,
                on_false_value=on_false, cmp_op=nl.greater_equal, offset=window - 1 - q0 + k0,
            )  # fmt: skip
        nisa.tensor_scalar_reduce(
            dst=s_tile, data=src, op0=nl.multiply, operand0=float(scale), reduce_op=nl.maximum,
            reduce_res=partial_max[:nq, j],
        )  # fmt: skip

    if run:
        t0, j0, count = run
        for r in nl.affine_range(count):
            c0 = (t0 + r) * KV_TILE  # t is the tile index within the section
            s_psum = nl.ndarray((Q_GROUP, KV_TILE), dtype=f32, buffer=nl.psum, name="qk_psum")
            nisa.nc_matmul(s_psum[:nq, :], stationary=q_t[:, :nq], moving=k_t[:, c0 : c0 + KV_TILE])
            nisa.tensor_scalar_reduce(
                dst=scores[:nq, c0 : c0 + KV_TILE], data=s_psum[:nq, :], op0=nl.multiply, operand0=float(scale),
                reduce_op=nl.maximum, reduce_res=partial_max[:nq, j0 + r],
            )  # fmt: skip

    # -- negated section max, running max and α ----------------------------------------------------------------
    neg_max, alpha = _running_max(run_neg_max, partial_max, nq, n_kept, first)

    # -- exp + row sum in one activation, PE transpose, MM2 ----------------------------------------------------
    sums = nl.ndarray((Q_GROUP, n_kept), dtype=f32, buffer=nl.sbuf, name="exp_partial_sum")
    o_psum = nl.ndarray((Q_GROUP, d), dtype=f32, buffer=nl.psum, name="pv_psum")
    for j, (t, k0, nk, kind) in enumerate(tiles):
        c0 = k0 - s0
        e = nl.ndarray((Q_GROUP, KV_TILE), dtype=dt, buffer=nl.sbuf, name="exp")
        nisa.activation(
            dst=e[:nq, :nk], op=nl.exp, data=scores[:nq, c0 : c0 + nk], bias=neg_max, scale=1.0,
            reduce_op=nl.add, reduce_res=sums[:nq, j], reduce_cmd=nisa.reduce_cmd.reset_reduce,
        )  # fmt: skip
        # 128-row KV blocks whose exp is all zero (above the diagonal / outside the window) skip PE work
        blocks = _kept_blocks(q0, nq, k0, nk, kind)
        lo, hi = blocks[0], blocks[-1] + 1
        e_psum = nl.ndarray((KV_BLOCK, BLOCKS, Q_GROUP), dtype=dt, buffer=nl.psum, name="expT_psum")
        for i in blocks:
            kbk = min(KV_BLOCK, nk - i * KV_BLOCK)
            nisa.nc_transpose(dst=e_psum[:kbk, i, :nq], data=e[:nq, i * KV_BLOCK : i * KV_BLOCK + kbk])
        e_t = nl.ndarray((KV_BLOCK, BLOCKS, Q_GROUP), dtype=dt, buffer=nl.sbuf, name="expT")
        full_hi = min(hi, nk // KV_BLOCK)
        if full_hi > lo:
            nisa.tensor_copy(dst=e_t[:, lo:full_hi, :nq], src=e_psum[:, lo:full_hi, :nq])
        if hi > full_hi:
            rest = nk - full_hi * KV_BLOCK
            nisa.tensor_copy(dst=e_t[:rest, full_hi, :nq], src=e_psum[:rest, full_hi, :nq])
        for i in blocks:
            kbk = min(KV_BLOCK, nk - i * KV_BLOCK)
            nisa.nc_matmul(o_psum[:nq, :], stationary=e_t[:kbk, i, :nq], moving=v_sb[:kbk, t * BLOCKS + i, :])

    if run:
        t0, j0, count = run
        for r in nl.affine_range(count):
            c0 = (t0 + r) * KV_TILE  # t is the tile index within the section
            e = nl.ndarray((Q_GROUP, KV_TILE), dtype=dt, buffer=nl.sbuf, name="exp")
            nisa.activation(
                dst=e[:nq, :], op=nl.exp, data=scores[:nq, c0 : c0 + KV_TILE], bias=neg_max, scale=1.0,
                reduce_op=nl.add, reduce_res=sums[:nq, j0 + r], reduce_cmd=nisa.reduce_cmd.reset_reduce,
            )  # fmt: skip
            e_psum = nl.ndarray((KV_BLOCK, BLOCKS, Q_GROUP), dtype=dt, buffer=nl.psum, name="expT_psum")
            for i in range(BLOCKS):
                nisa.nc_transpose(dst=e_psum[:, i, :nq], data=e[:nq, i * KV_BLOCK : (i + 1) * KV_BLOCK])
            e_t = nl.ndarray((KV_BLOCK, BLOCKS, Q_GROUP), dtype=dt, buffer=nl.sbuf, name="expT")
            nisa.tensor_copy(dst=e_t[:, :, :nq], src=e_psum[:, :, :nq])
            for i in range(BLOCKS):
                nisa.nc_matmul(o_psum[:nq, :], stationary=e_t[:, i, :nq], moving=v_sb[:, (t0 + r) * BLOCKS + i, :])

    # -- running sum and output accumulator ----------------------------------------------------------------------
    l_run = run_sum[:nq]
    o_acc = nl.ndarray((Q_GROUP, d), dtype=f32, buffer=nl.sbuf, name="o_acc")
    if first:
        nisa.tensor_reduce(dst=l_run, op=nl.add, data=sums[:nq, :n_kept], axis=1)
        nisa.tensor_copy(dst=o_acc[:nq], src=o_psum[:nq, :])
    else:
        l_sec = nl.ndarray((Q_GROUP, 1), dtype=f32, buffer=nl.sbuf, name="sec_sum")
        nisa.tensor_reduce(dst=l_sec[:nq], op=nl.add, data=sums[:nq, :n_kept], axis=1)
        # l = α·l + l_section
        nisa.tensor_scalar(dst=l_run, data=l_run, op0=nl.multiply, operand0=alpha[:nq], op1=nl.add,
                           operand1=l_sec[:nq])  # fmt: skip
        o_prev = nl.ndarray((Q_GROUP, d), dtype=f32, buffer=nl.sbuf, name="o_prev")
        nisa.dma_copy(dst=o_prev[:nq], src=scratch[b, q0 : q0 + nq, :])
        # O = α·O_prev + O_section
        nisa.scalar_tensor_tensor(
            dst=o_acc[:nq], data=o_prev[:nq], op0=nl.multiply, operand0=alpha[:nq], op1=nl.add,
            operand1=o_psum[:nq, :],
        )  # fmt: skip

    if not last:
        nisa.dma_copy(dst=scratch[b, q0 : q0 + nq, :], src=o_acc[:nq])
        return
    # -- normalise and store --------------------------------------------------------------------------------------
    _normalise_store(out, o_acc, l_run, b, q0, nq, d, f32)


def _normalise_store(out, o_acc, l_run, b, q0, nq, d, dtype):
    """O / Σ for the group's rows (the reciprocal of the row sums as ACT's per-partition scale), as ``dtype``,
    stored to ``out``."""
    inv = nl.ndarray((Q_GROUP, 1), dtype=nl.float32, buffer=nl.sbuf, name="inv_sum")
    nisa.reciprocal(dst=inv[:nq], data=l_run)
    o_fin = nl.ndarray((Q_GROUP, d), dtype=dtype, buffer=nl.sbuf, name="o_final")
    nisa.activation(dst=o_fin[:nq], op=nl.copy, data=o_acc[:nq], scale=inv[:nq])
    nisa.dma_copy(dst=out[b, q0 : q0 + nq, :], src=o_fin[:nq])


def _uniform_run(tiles):
    """Split the kept tiles of a (Q group, section) into the masked or ragged ones, listed first, and the longest
    run of consecutive full unmasked tiles as (first tile, its column among the kept tiles, count); a run shorter
    than two stays in the list."""
    plain = [i for i, (t, k0, nk, kind) in enumerate(tiles) if nk == KV_TILE and not kind["causal"] and not kind["window"]]
    best = []
    for i in plain:
        if best and best[-1][-1] == i - 1 and tiles[i][0] == tiles[i - 1][0] + 1:
            best[-1].append(i)
        else:
            best.append([i])
    longest = max(best, key=len, default=[])
    if len(longest) < 2:
        return tiles, []
    rest = [tile for i, tile in enumerate(tiles) if i not in longest]
    return rest, (tiles[longest[0]][0], len(rest), len(longest))


# -- the rolled causal kernel with uniform loops ------------------------------------------------------------------
# Causal attention is a triangle of (Q group, KV tile) pairs: a loop over groups whose inner loop runs over "the
# tiles below the diagonal" has a trip count that depends on the group, which a counted loop cannot express. With
# seqlen a multiple of the section size, the triangle splits into rectangles whose loops have constant bounds:
#
# * phase 1, section by section (a Python loop: seqlen / section of them): every group wholly below section si
#   (groups G·(si+1) … n_groups-1, G = section / 128) sees all T = section / 512 tiles of it unmasked. A rolled loop
#   over those groups, around rolled loops over the T tiles;
# * phase 2, the diagonal band: group g = G·si + 4m + j (m < T, j < 4) sees in its own section si the m full tiles
#   0 … m-1 and the diagonal tile m masked with q - k = 128·j + p - i: the same for every si. A rolled loop over the
#   sections si ≥ 1 (section 0, every group's first, is the same body once before it), around one body per (m, j),
#   each with a rolled loop over its m full tiles.
#
# The program grows as seqlen / section (phase 1) plus a constant (phase 2's body: 4·T group bodies); every
# operand moves with one loop only (a group's rows and statistics with the outer loop, a tile's columns with the
# inner), so every loop rolls.


def _uniform_causal(q, k, v, out, sec, scale, tile_range):
    bs, seqlen, d = q.shape
    bs_kv = k.shape[0]
    dt, f32 = q.dtype, nl.float32
    n_groups, n_sec = seqlen // Q_GROUP, seqlen // sec
    groups_per_sec, tiles = sec // Q_GROUP, sec // KV_TILE
    q_per_kv = bs // bs_kv
    on_false = FLOAT32_MIN / max(1.0, float(scale))
    scratch = nl.ndarray((bs, seqlen, d), dtype=f32, buffer=nl.hbm, name="o_partial") if n_sec > 1 else None
    ctx = dict(q=q, out=out, scratch=scratch, d=d, dt=dt, scale=scale, on_false=on_false, tile_range=tile_range)
    for kb in range(bs_kv):
        batches = range(kb * q_per_kv, (kb + 1) * q_per_kv)
        # running (negated max, sum) of every group, one column each, resident in SBUF over both phases
        stats = {
            b: (nl.ndarray((Q_GROUP, n_groups), dtype=f32, buffer=nl.sbuf, name=f"neg_max_b{b}"),
                nl.ndarray((Q_GROUP, n_groups), dtype=f32, buffer=nl.sbuf, name=f"sum_b{b}"))
            for b in batches
        }  # fmt: skip
        for si in range(n_sec - 1):  # phase 1
            k_t = nl.ndarray((d, sec), dtype=dt, buffer=nl.sbuf, name="kT")
            v_sb = nl.ndarray((KV_BLOCK, sec // KV_BLOCK, d), dtype=dt, buffer=nl.sbuf, name="v")
            _load_kv(k, v, k_t, v_sb, kb, si * sec, sec, seqlen, d, [True] * tiles)
            g0 = groups_per_sec * (si + 1)
            for b in batches:
                for gi in nl.affine_range(n_groups - g0):
                    _uniform_group(ctx, k_t, v_sb, stats[b], b, g0 + gi, tiles, None, si == 0, False)
        _diagonal_band(ctx, k, v, stats, batches, kb, 0, sec)  # phase 2: section 0 ...
        if n_sec > 1:
            for s in nl.affine_range(n_sec - 1):  # ... then every other section's band, one body
                _diagonal_band(ctx, k, v, stats, batches, kb, s + 1, sec)
    return out


def _diagonal_band(ctx, k, v, stats, batches, kb, si, sec):
    """The groups whose diagonal lies in section ``si`` (an int or a loop index): load the section's K/V, then each
    group's diagonal tile and the full tiles before it; the group's last section (normalise and store)."""
    d, dt = ctx["d"], ctx["dt"]
    s0 = si * sec
    k_t = nl.ndarray((d, sec), dtype=dt, buffer=nl.sbuf, name="kT_band")
    v_sb = nl.ndarray((KV_BLOCK, sec // KV_BLOCK, d), dtype=dt, buffer=nl.sbuf, name="v_band")
    chunk = min(sec, 4 * KV_TILE)  # a few large DMAs (their source moves with the section loop only)
    base = kb * k.shape[1] * d
    for c in range(0, sec, chunk):
        nisa.dma_transpose(dst=k_t[:, c : c + chunk], src=k[kb, s0 + c : s0 + c + chunk, :])
        nisa.dma_copy(
            dst=v_sb[:, c // KV_BLOCK : (c + chunk) // KV_BLOCK, :],
            src=v.ap(pattern=[[d, KV_BLOCK], [KV_BLOCK * d, chunk // KV_BLOCK], [1, d]], offset=base + (s0 + c) * d),
        )  # fmt: skip
    first = isinstance(si, int) and si == 0
    for b in batches:
        for m in range(sec // KV_TILE):
            for j in range(BLOCKS):
                g = si * (sec // Q_GROUP) + BLOCKS * m + j
                _uniform_group(ctx, k_t, v_sb, stats[b], b, g, m, (m, j), first, True)


def _uniform_group(ctx, k_t, v_sb, stats, b, g, n_full, diag, first, last):
    """Q group ``g`` (an int or an affine expression of loop indices) against one section held in ``k_t``/``v_sb``:
    ``diag`` = (m, j) is the diagonal tile m, masked to keep ``128·j + p - i >= 0`` (listed first, so the rolled
    run's matmuls accumulate onto it), then the ``n_full`` unmasked tiles 0 … n_full-1 in a rolled loop."""
    q, out, scratch, d, dt, scale = ctx["q"], ctx["out"], ctx["scratch"], ctx["d"], ctx["dt"], ctx["scale"]
    f32 = nl.float32
    slen = k_t.shape[1]
    q0 = g * Q_GROUP
    n_kept = n_full + (diag is not None)
    j0 = int(diag is not None)  # the run's first column among the kept tiles
    q_t = nl.ndarray((d, Q_GROUP), dtype=dt, buffer=nl.sbuf, name="qT_group")
    nisa.dma_transpose(dst=q_t, src=q[b, q0 : q0 + Q_GROUP, :])

    # -- MM1, mask, scale + partial row max ------------------------------------------------------------------
    scores = nl.ndarray((Q_GROUP, slen), dtype=f32, buffer=nl.sbuf, name="scores")
    partial_max = nl.ndarray((Q_GROUP, n_kept), dtype=f32, buffer=nl.sbuf, name="partial_max")
    if diag is not None:
        m, j = diag
        c0 = m * KV_TILE
        s_psum = nl.ndarray((Q_GROUP, KV_TILE), dtype=f32, buffer=nl.psum, name="qk_psum")
        nisa.nc_matmul(s_psum, stationary=q_t, moving=k_t[:, c0 : c0 + KV_TILE])
        s_tile = scores[:, c0 : c0 + KV_TILE]
        nisa.tensor_copy(dst=s_tile, src=s_psum)
        nisa.affine_select(
            dst=s_tile, pattern=[[-1, KV_TILE]], channel_multiplier=1, on_true_tile=s_tile,
            on_false_value=ctx["on_false"], cmp_op=nl.greater_equal, offset=Q_GROUP * j,
        )  # fmt: skip
        nisa.tensor_scalar_reduce(
            dst=s_tile, data=s_tile, op0=nl.multiply, operand0=float(scale), reduce_op=nl.maximum,
            reduce_res=partial_max[:, 0],
        )  # fmt: skip
    if n_full:
        for r in ctx["tile_range"](n_full):
            c0 = r * KV_TILE
            s_psum = nl.ndarray((Q_GROUP, KV_TILE), dtype=f32, buffer=nl.psum, name="qk_psum")
            nisa.nc_matmul(s_psum, stationary=q_t, moving=k_t[:, c0 : c0 + KV_TILE])
            nisa.tensor_scalar_reduce(
                dst=scores[:, c0 : c0 + KV_TILE], data=s_psum, op0=nl.multiply, operand0=float(scale),
                reduce_op=nl.maximum, reduce_res=partial_max[:, j0 + r],
            )  # fmt: skip

    # -- negated section max, running max and α ------------------------------------------------------------------
    run_neg_max, run_sum = stats[0][:, g : g + 1], stats[1][:, g : g + 1]
    alpha = None
    if first:
        nisa.tensor_reduce(dst=run_neg_max, op=nl.maximum, data=partial_max, axis=1, negate=True)
    else:
        sec_neg_max = nl.ndarray((Q_GROUP, 1), dtype=f32, buffer=nl.sbuf, name="sec_neg_max")
        nisa.tensor_reduce(dst=sec_neg_max, op=nl.maximum, data=partial_max, axis=1, negate=True)
        prev_neg_max = nl.ndarray((Q_GROUP, 1), dtype=f32, buffer=nl.sbuf, name="prev_neg_max")
        nisa.tensor_copy(dst=prev_neg_max, src=run_neg_max)
        nisa.tensor_tensor(dst=run_neg_max, data1=prev_neg_max, data2=sec_neg_max, op=nl.minimum)
        alpha = nl.ndarray((Q_GROUP, 1), dtype=f32, buffer=nl.sbuf, name="alpha")
        nisa.activation(dst=alpha, op=nl.exp, data=prev_neg_max, bias=run_neg_max, scale=-1.0)

    # -- exp + row sum, PE transpose, MM2 -------------------------------------------------------------------------
    sums = nl.ndarray((Q_GROUP, n_kept), dtype=f32, buffer=nl.sbuf, name="exp_partial_sum")
    o_psum = nl.ndarray((Q_GROUP, d), dtype=f32, buffer=nl.psum, name="pv_psum")
    if diag is not None:
        m, j = diag
        _exp_tile(scores, sums, run_neg_max, o_psum, v_sb, m, 0, j + 1, dt)
    if n_full:
        for r in ctx["tile_range"](n_full):
            _exp_tile(scores, sums, run_neg_max, o_psum, v_sb, r, j0 + r, BLOCKS, dt)

    # -- running sum and output accumulator ----------------------------------------------------------------------
    o_acc = nl.ndarray((Q_GROUP, d), dtype=f32, buffer=nl.sbuf, name="o_acc")
    if first:
        nisa.tensor_reduce(dst=run_sum, op=nl.add, data=sums, axis=1)
        nisa.tensor_copy(dst=o_acc, src=o_psum)
    else:
        l_sec = nl.ndarray((Q_GROUP, 1), dtype=f32, buffer=nl.sbuf, name="sec_sum")
        nisa.tensor_reduce(dst=l_sec, op=nl.add, data=sums, axis=1)
        nisa.tensor_scalar(dst=run_sum, data=run_sum, op0=nl.multiply, operand0=alpha, op1=nl.add, operand1=l_sec)
        o_prev = nl.ndarray((Q_GROUP, d), dtype=f32, buffer=nl.sbuf, name="o_prev")
        nisa.dma_copy(dst=o_prev, src=scratch[b, q0 : q0 + Q_GROUP, :])
        nisa.scalar_tensor_tensor(dst=o_acc, data=o_prev, op0=nl.multiply, operand0=alpha, op1=nl.add,
                                  operand1=o_psum)  # fmt: skip
    if not last:
        nisa.dma_copy(dst=scratch[b, q0 : q0 + Q_GROUP, :], src=o_acc)
        return
    _normalise_store(out, o_acc, run_sum, b, q0, Q_GROUP, d, f32)


def _exp_tile(scores, sums, neg_max, o_psum, v_sb, t, col, n_blocks, dt):
    """exp(S - m) of tile ``t`` of the section with its row sum in column ``col`` of ``sums``; its first
    ``n_blocks`` 128-column blocks transposed on the PE and multiplied by V into ``o_psum``."""
    f32 = nl.float32
    c0 = t * KV_TILE
    e = nl.ndarray((Q_GROUP, KV_TILE), dtype=dt, buffer=nl.sbuf, name="exp")
    nisa.activation(
        dst=e, op=nl.exp, data=scores[:, c0 : c0 + KV_TILE], bias=neg_max, scale=1.0,
        reduce_op=nl.add, reduce_res=sums[:, col], reduce_cmd=nisa.reduce_cmd.reset_reduce,
    )  # fmt: skip
    e_psum = nl.ndarray((KV_BLOCK, BLOCKS, Q_GROUP), dtype=dt, buffer=nl.psum, name="expT_psum")
    for i in range(n_blocks):
        nisa.nc_transpose(dst=e_psum[:, i, :], data=e[:, i * KV_BLOCK : (i + 1) * KV_BLOCK])
    e_t = nl.ndarray((KV_BLOCK, BLOCKS, Q_GROUP), dtype=dt, buffer=nl.sbuf, name="expT")
    nisa.tensor_copy(dst=e_t[:, :n_blocks, :], src=e_psum[:, :n_blocks, :])
    for i in range(n_blocks):
        nisa.nc_matmul(o_psum, stationary=e_t[:, i, :], moving=v_sb[:, t * BLOCKS + i, :])
# -- the software-pipelined kernel (``flash_attention``) ----------------------------------------------------------
#
# The same algorithm, arranged so that the engines overlap across query groups:
# * every per-group, per-tile tensor is its own allocation (scores, exp, transposed exp, PSUM tiles), so nothing
#   but the data chains one group to the next;
# * the program is emitted software-pipelined: the scores stages (MM1, mask, scale + partial max) of the next
#   ``PIPELINE_DEPTH`` groups come before the softmax stage (exp + sum, transposes, MM2, normalise) of the current
#   one (measured at 8K: depth 1 433.6 µs, 2 423.5 µs, 3 424.8 µs; bench/README.md);
# * a diagonal tile stops after its last 128-column block holding a key some query of the group keeps
#   (``_trim_causal``): MM1, the mask, the max, the exp and Pᵀ skip the blocks masked for every row;
# * loads are issued in the order the groups first need them (K/V tile t and Q group g interleaved);
# * Pᵀ: the PE transposes land in PSUM in the exp tile's dtype (the ISA requires dst dtype == data dtype), so the
#   PSUM → SBUF copy is a 2-byte copy (VectorE fast mode); some chunks are transposed by one DMA instead
#   (``DMA_TRANSPOSE_EVERY``), which takes work off PE, ACT and DVE and gives it to the otherwise idle DMA queues;
# * the row max: VectorE's tensor_scalar_reduce straight from PSUM, or (masked tiles, and every
#   ``MAX_ON_POOL_EVERY``-th tile) ScalarE's scaled copy out of PSUM, folded in halves by GpSimd's
#   tensor_tensor(maximum) and finished by VectorE's tensor_reduce on a quarter of the columns (tensor_reduce runs
#   on VectorE only), which puts the idle GpSimd to work and balances ScalarE against VectorE;
# * the exp and its row sum run over ``EXP_CHUNK`` tiles at once (one instruction's fixed cost per chunk).
# The constants below were tuned on the calibrated timeline model at 4K and 8K (bench/README.md).

DMA_TRANSPOSE_EVERY = 3  # every 3rd chunk (2-byte dtypes) transposes Pᵀ by DMA; 0: never
DMA_TRANSPOSE_FROM = 0.25  # ... from this fraction of the groups on (the loads hold the DMA queues before)
MAX_ON_POOL_EVERY = 4  # every n-th kept tile: ACT scales it out of PSUM, GpSimd takes the max; 0: never
EXP_CHUNK = 2  # kept tiles per exp instruction (and per chunk DMA transpose)
PIPELINE_DEPTH = 2  # scores stages emitted ahead of the softmax stage of the oldest pending group
PIPELINE_DEPTH_SECTIONED = 1  # ... when KV runs in sections (measured at 16K: depth 1 3230.9 µs, 2 3734.8 µs)
POOL_MAX_FOLDS = 2  # GpSimd halvings of an SBUF score tile before VectorE's row max (_pool_folded_max)
POOL_MAX_MIN_WIDTH = 64  # ... down to at least this many columns
COPY_ON_ACT_EVERY = 4  # every n-th PE-transposed tile copies Pᵀ out of PSUM on ACT instead of DVE; 0: never


def _attention_pipelined(q, k, v, scale, causal_mask, sliding_window):
    bs, bs_kv, seqlen_q, seqlen_kv, d, causal, window, out = _problem(q, k, v, causal_mask, sliding_window)
    dt = q.dtype
    q_per_kv = bs // bs_kv
    n_groups, sections, on_false, plan, active, scratch = _sectioning(bs, seqlen_q, seqlen_kv, d, scale, causal, window)
    plan = {key: [_trim_causal(g * Q_GROUP, min(Q_GROUP, seqlen_q - g * Q_GROUP), tile) for tile in tiles]
            for key, tiles in plan.items() for g in [key[0]]}  # fmt: skip

    cfg = {"d": d, "dt": dt, "scale": float(scale), "on_false": on_false, "window": window, "seqlen_q": seqlen_q,
           "dma_t": dt in (nl.bfloat16, nl.float16) and DMA_TRANSPOSE_EVERY > 0, "count": 0, "tiles": 0, "copies": 0,
           "dma_from": int(n_groups * DMA_TRANSPOSE_FROM)}  # fmt: skip
    for kb in range(bs_kv):
        batches = list(range(kb * q_per_kv, (kb + 1) * q_per_kv))
        run_neg_max = {}
        run_sum = {}
        for b in batches:
            for g in range(n_groups):
                run_neg_max[b, g] = nl.ndarray((Q_GROUP, 1), dtype=nl.float32, buffer=nl.sbuf, name=f"neg_max_b{b}_g{g}")
                run_sum[b, g] = nl.ndarray((Q_GROUP, 1), dtype=nl.float32, buffer=nl.sbuf, name=f"sum_b{b}_g{g}")

        for si, (s0, slen) in enumerate(sections):
            groups = [g for g in range(n_groups) if si in active[g]]
            if not groups:
                continue
            n_blocks = _cdiv(slen, KV_BLOCK)
            k_t = nl.ndarray((d, slen), dtype=dt, buffer=nl.sbuf, name="kT")
            v_sb = nl.ndarray((KV_BLOCK, n_blocks, d), dtype=dt, buffer=nl.sbuf, name="v")
            q_t = {b: nl.ndarray((d, n_groups, Q_GROUP), dtype=dt, buffer=nl.sbuf, name="qT") for b in batches}
            _load_in_order(q, k, v, q_t, k_t, v_sb, kb, batches, groups, plan, si, s0, slen, seqlen_q, seqlen_kv, d)

            pending = []  # scores stages emitted, their softmax stages not yet
            for b in batches:
                for g in groups:
                    st = _scores_stage(q_t[b][:, g, :], k_t, run_neg_max[b, g], b, g, si, s0, plan[g, si],
                                       active[g], cfg)  # fmt: skip
                    pending.append((st, out, scratch, v_sb, run_sum, cfg))
                    if len(pending) > (PIPELINE_DEPTH if len(sections) == 1 else PIPELINE_DEPTH_SECTIONED):
                        _softmax_stage(*pending.pop(0))
            for stage in pending:
                _softmax_stage(*stage)
    return out


def _trim_causal(q0, nq, tile):
    """A diagonal tile ``(t, k0, nk, kind)`` cut after its last 128-column block holding a key at or before the
    group's last query: the columns beyond are masked for every row, so their scores, exps and Pᵀ blocks are never
    computed (MM1, the mask, the max and the exp all shrink with the tile)."""
    t, k0, nk, kind = tile
    if not kind["causal"]:
        return tile
    last = q0 + nq - 1 - k0  # the last column any row of the group keeps
    return t, k0, min(nk, _cdiv(last + 1, KV_BLOCK) * KV_BLOCK), kind


def _load_kv_tile(k, v, k_t, v_sb, kb, s0, slen, d, base, t):
    """DMA tile ``t`` of the section at ``s0``: its Kᵀ columns, and its V rows as full 128-row blocks plus the rest
    (``base``: the section's first V element)."""
    k0, nk = t * KV_TILE, min(KV_TILE, slen - t * KV_TILE)
    nisa.dma_transpose(dst=k_t[:, k0 : k0 + nk], src=k[kb, s0 + k0 : s0 + k0 + nk, :])
    full, rest = nk // KV_BLOCK, nk % KV_BLOCK
    if full:
        nisa.dma_copy(
            dst=v_sb[:, t * BLOCKS : t * BLOCKS + full, :],
            src=v.ap(pattern=[[d, KV_BLOCK], [KV_BLOCK * d, full], [1, d]], offset=base + k0 * d),
        )
    if rest:
        nisa.dma_copy(
            dst=v_sb[:rest, t * BLOCKS + full, :],
            src=v.ap(pattern=[[d, rest], [1, d]], offset=base + (k0 + full * KV_BLOCK) * d),
        )


def _load_in_order(q, k, v, q_t, k_t, v_sb, kb, batches, groups, plan, si, s0, slen, seqlen_q, seqlen_kv, d):
    """Q group and K/V tile loads, in the order the groups first use them (a tile before the group needing it)."""
    first_use = {}
    for g in groups:
        for t, _, _, _ in plan[g, si]:
            first_use.setdefault(t, g)
    events = [((0, g, 0), ("kv", t)) for t, g in first_use.items()]
    events += [((i, g, 1), ("q", b, g)) for i, b in enumerate(batches) for g in groups]
    base = kb * seqlen_kv * d + s0 * d
    for _, ev in sorted(events, key=lambda e: e[0]):
        if ev[0] == "q":
            _, b, g = ev
            q0, nq = g * Q_GROUP, min(Q_GROUP, seqlen_q - g * Q_GROUP)
            nisa.dma_transpose(dst=q_t[b][:, g, :nq], src=q[b, q0 : q0 + nq, :])
            continue
        t = ev[1]
        _load_kv_tile(k, v, k_t, v_sb, kb, s0, slen, d, base, t)


def _scores_stage(q_g, k_t, run_neg_max, b, g, si, s0, tiles, active, cfg):
    """MM1, mask, scale + partial row max of every kept tile, then the negated (running) max and α."""
    f32 = nl.float32
    q0, nq = g * Q_GROUP, min(Q_GROUP, cfg["seqlen_q"] - g * Q_GROUP)
    first = si == active[0]
    n_kept = len(tiles)
    partial_max = nl.ndarray((Q_GROUP, n_kept), dtype=f32, buffer=nl.sbuf, name="partial_max")
    chunks = _chunks(tiles)
    scores = []  # per tile: (its chunk's scores buffer, its first column there)
    for chunk in chunks:
        buf = nl.ndarray((Q_GROUP, len(chunk) * KV_TILE), dtype=f32, buffer=nl.sbuf, name="scores")
        scores += [(buf, i * KV_TILE) for i in range(len(chunk))]
    for j, (t, k0, nk, kind) in enumerate(tiles):
        c0 = k0 - s0
        s_psum = nl.ndarray((Q_GROUP, KV_TILE), dtype=f32, buffer=nl.psum, name="qk_psum")
        nisa.nc_matmul(s_psum[:nq, :nk], stationary=q_g[:, :nq], moving=k_t[:, c0 : c0 + nk])
        buf, off = scores[j]
        s = buf[:, off : off + KV_TILE]
        src = s_psum[:nq, :nk]
        masked = kind["causal"] or kind["window"]
        cfg["tiles"] += 0 if masked else 1
        on_pool = masked or (MAX_ON_POOL_EVERY > 0 and cfg["tiles"] % MAX_ON_POOL_EVERY == 0)
        # on_pool: ACT scales the tile out of PSUM and GpSimd takes its max (the masked value is then scaled first);
        # always for a masked tile, which needs an SBUF copy for affine_select (GpSimd) anyway
        on_false = cfg["on_false"] * cfg["scale"] if on_pool else cfg["on_false"]
        if on_pool:
            nisa.activation(dst=s[:nq, :nk], op=nl.copy, data=src, scale=cfg["scale"])
        elif kind["causal"] or kind["window"]:
            nisa.tensor_copy(dst=s[:nq, :nk], src=src)
        if on_pool or kind["causal"] or kind["window"]:
            src = s[:nq, :nk]
        if kind["causal"]:
            nisa.affine_select(
                dst=s[:nq, :nk], pattern=[[-1, nk]], channel_multiplier=1, on_true_tile=s[:nq, :nk],
                on_false_value=on_false, cmp_op=nl.greater_equal, offset=q0 - k0,
            )  # fmt: skip
        if kind["window"]:
            nisa.affine_select(
                dst=s[:nq, :nk], pattern=[[1, nk]], channel_multiplier=-1, on_true_tile=s[:nq, :nk],
                on_false_value=on_false, cmp_op=nl.greater_equal, offset=cfg["window"] - 1 - q0 + k0,
            )  # fmt: skip
        if on_pool:
            _pool_folded_max(partial_max[:nq, j], s, nq, nk)
        else:
            nisa.tensor_scalar_reduce(
                dst=s[:nq, :nk], data=src, op0=nl.multiply, operand0=cfg["scale"], reduce_op=nl.maximum,
                reduce_res=partial_max[:nq, j],
            )  # fmt: skip

    neg_max, alpha = _running_max(run_neg_max, partial_max, nq, n_kept, first)
    return {"b": b, "g": g, "si": si, "s0": s0, "tiles": tiles, "active": active, "scores": scores, "chunks": chunks,
            "neg_max": neg_max, "alpha": alpha, "q0": q0, "nq": nq}  # fmt: skip


def _pool_folded_max(dst, s, nq, nk):
    """Row max of the scaled SBUF tile ``s[:nq, :nk]`` into ``dst``: GpSimd folds the tile in halves
    (``tensor_tensor(maximum)``, "using Vector Engine or GpSimd Engine") ``POOL_MAX_FOLDS`` times, then VectorE
    reduces what is left (``tensor_reduce`` runs "using Vector Engine" only). The folds move work off VectorE, the
    busiest engine, onto GpSimd, which has its own SBUF port on NeuronCore-v3 (trainium2_arch.rst)."""
    f32 = nl.float32
    width = nk
    for _ in range(POOL_MAX_FOLDS):
        if width % 2 or width // 2 < POOL_MAX_MIN_WIDTH:
            break
        half = width // 2
        folded = nl.ndarray((Q_GROUP, half), dtype=f32, buffer=nl.sbuf, name="max_fold")
        nisa.tensor_tensor(dst=folded[:nq], data1=s[:nq, :half], data2=s[:nq, half:width], op=nl.maximum,
                           engine=nisa.engine.gpsimd)  # fmt: skip
        s, width = folded, half
    nisa.tensor_reduce(dst=dst, op=nl.maximum, data=s[:nq, :width], axis=1)


def _softmax_stage(st, out, scratch, v_sb, run_sum, cfg):
    """exp + row sum per tile, Pᵀ (PE or DMA), MM2 into one PSUM bank, then merge / normalise and store."""
    f32 = nl.float32
    d, dt = cfg["d"], cfg["dt"]
    b, g, si, tiles, q0, nq = st["b"], st["g"], st["si"], st["tiles"], st["q0"], st["nq"]
    first, last = si == st["active"][0], si == st["active"][-1]
    chunks = st["chunks"]
    sums = nl.ndarray((Q_GROUP, len(chunks)), dtype=f32, buffer=nl.sbuf, name="exp_partial_sum")
    o_psum = nl.ndarray((Q_GROUP, d), dtype=f32, buffer=nl.psum, name="pv_psum")
    for ci, chunk in enumerate(chunks):
        # one exp (+ row sum) over the chunk's tiles: one instruction's fixed cost instead of one per tile
        buf = st["scores"][chunk[0]][0]
        ncols = (len(chunk) - 1) * KV_TILE + tiles[chunk[-1]][2]
        e = nl.ndarray((Q_GROUP, len(chunk) * KV_TILE), dtype=dt, buffer=nl.sbuf, name="exp")
        nisa.activation(
            dst=e[:nq, :ncols], op=nl.exp, data=buf[:nq, :ncols], bias=st["neg_max"], scale=1.0,
            reduce_op=nl.add, reduce_res=sums[:nq, ci], reduce_cmd=nisa.reduce_cmd.reset_reduce,
        )  # fmt: skip
        cfg["count"] += 1
        use_dma = cfg["dma_t"] and g >= cfg["dma_from"] and cfg["count"] % DMA_TRANSPOSE_EVERY == 0
        kept = [_kept_blocks(q0, nq, tiles[j][1], tiles[j][2], tiles[j][3]) for j in chunk]
        whole = all(tiles[j][2] == KV_TILE and len(kb) == BLOCKS for j, kb in zip(chunk, kept))
        if use_dma and whole:  # the chunk's Pᵀ in one DMA: [q, blocks, k] -> [k, blocks, q]
            nb = len(chunk) * BLOCKS
            e_t = nl.ndarray((KV_BLOCK, nb, Q_GROUP), dtype=dt, buffer=nl.sbuf, name="expT")
            nisa.dma_transpose(dst=e_t[:, :, :nq], src=e.reshape((Q_GROUP, nb, KV_BLOCK))[:nq])
            for pos, j in enumerate(chunk):
                t = tiles[j][0]
                for i in range(BLOCKS):
                    nisa.nc_matmul(o_psum[:nq, :], stationary=e_t[:, pos * BLOCKS + i, :nq],
                                   moving=v_sb[:, t * BLOCKS + i, :])  # fmt: skip
            continue
        for pos, j in enumerate(chunk):
            t, k0, nk, kind = tiles[j]
            et = _transpose_p(e[:, pos * KV_TILE : (pos + 1) * KV_TILE], kept[pos], nq, nk, dt, use_dma, cfg)
            for i in kept[pos]:
                kbk = min(KV_BLOCK, nk - i * KV_BLOCK)
                nisa.nc_matmul(o_psum[:nq, :], stationary=et[:kbk, i, :nq], moving=v_sb[:kbk, t * BLOCKS + i, :])

    l_run = run_sum[b, g][:nq]
    if first:
        nisa.tensor_reduce(dst=l_run, op=nl.add, data=sums[:nq, : len(chunks)], axis=1)
        o_acc = o_psum
    else:
        alpha = st["alpha"]
        l_sec = nl.ndarray((Q_GROUP, 1), dtype=f32, buffer=nl.sbuf, name="sec_sum")
        nisa.tensor_reduce(dst=l_sec[:nq], op=nl.add, data=sums[:nq, : len(chunks)], axis=1)
        nisa.tensor_scalar(dst=l_run, data=l_run, op0=nl.multiply, operand0=alpha[:nq], op1=nl.add,
                           operand1=l_sec[:nq])  # fmt: skip
        o_prev = nl.ndarray((Q_GROUP, d), dtype=f32, buffer=nl.sbuf, name="o_prev")
        nisa.dma_copy(dst=o_prev[:nq], src=scratch[b, q0 : q0 + nq, :])
        o_acc = nl.ndarray((Q_GROUP, d), dtype=f32, buffer=nl.sbuf, name="o_acc")
        nisa.scalar_tensor_tensor(
            dst=o_acc[:nq], data=o_prev[:nq], op0=nl.multiply, operand0=alpha[:nq], op1=nl.add,
            operand1=o_psum[:nq, :],
        )  # fmt: skip

    if not last:
        if first:  # the section's O leaves PSUM for the HBM scratch
            o_sb = nl.ndarray((Q_GROUP, d), dtype=f32, buffer=nl.sbuf, name="o_acc")
            nisa.tensor_copy(dst=o_sb[:nq], src=o_psum[:nq, :])
            o_acc = o_sb
        nisa.dma_copy(dst=scratch[b, q0 : q0 + nq, :], src=o_acc[:nq])
        return
    # normalised straight into the output dtype: the store moves half the bytes of an fp32 tile
    _normalise_store(out, o_acc, l_run, b, q0, nq, d, dt)


def _chunks(tiles):
    """Runs of up to ``EXP_CHUNK`` consecutive kept tiles sharing one scores and one exp buffer; a ragged tile
    (narrower than a KV tile) ends its run, so that a run's columns are contiguous."""
    chunks, cur = [], []
    for j, (_, _, nk, _) in enumerate(tiles):
        cur.append(j)
        if len(cur) == EXP_CHUNK or nk < KV_TILE:
            chunks.append(cur)
            cur = []
    if cur:
        chunks.append(cur)
    return chunks


def _transpose_p(e, blocks, nq, nk, dt, use_dma, cfg):
    """Pᵀ of one exp tile ``e`` [q, 512] as [k, block, q]: by DMA, or by PE transposes to PSUM plus one copy."""
    lo, hi = blocks[0], blocks[-1] + 1
    full_hi = min(hi, nk // KV_BLOCK)
    rest = nk - full_hi * KV_BLOCK if hi > full_hi else 0
    e_t = nl.ndarray((KV_BLOCK, BLOCKS, Q_GROUP), dtype=dt, buffer=nl.sbuf, name="expT")
    if use_dma:
        e3 = e.reshape((Q_GROUP, BLOCKS, KV_BLOCK))
        if full_hi > lo:
            nisa.dma_transpose(dst=e_t[:, lo:full_hi, :nq], src=e3[:nq, lo:full_hi, :])
        if rest:
            c = full_hi * KV_BLOCK
            nisa.dma_transpose(dst=e_t[:rest, full_hi, :nq], src=e[:nq, c : c + rest])
        return e_t
    e_psum = nl.ndarray((KV_BLOCK, BLOCKS, Q_GROUP), dtype=dt, buffer=nl.psum, name="expT_psum")
    for i in blocks:
        kbk = min(KV_BLOCK, nk - i * KV_BLOCK)
        nisa.nc_transpose(dst=e_psum[:kbk, i, :nq], data=e[:nq, i * KV_BLOCK : i * KV_BLOCK + kbk])
    cfg["copies"] += 1
    on_act = COPY_ON_ACT_EVERY > 0 and cfg["copies"] % COPY_ON_ACT_EVERY == 0
    if on_act and nisa.get_nc_version() == nisa.nc_version.gen2:
        # "On NeuronCore v2, tensor_copy is not supported on the Scalar Engine. Instead, use nisa.activation with
        # op=nl.copy." (exact for these bf16/fp32 tiles: ScalarE copies through fp32)
        def copy(dst, src):
            nisa.activation(dst=dst, op=nl.copy, data=src)
    else:
        eng = nisa.engine.scalar if on_act else nisa.engine.vector

        def copy(dst, src):
            nisa.tensor_copy(dst=dst, src=src, engine=eng)

    if full_hi > lo:
        copy(e_t[:, lo:full_hi, :nq], e_psum[:, lo:full_hi, :nq])
    if rest:
        copy(e_t[:rest, full_hi, :nq], e_psum[:rest, full_hi, :nq])
    return e_t
