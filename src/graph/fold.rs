//! The nearest-upsample skip fold (issue 23 §2): the skip of SRVGG-like upscalers,
//! `Add(DepthToSpace(c, r), Resize(nearest, ×r)(x))`, becomes
//! `DepthToSpace(Add(c, Conv1×1(x, E)), r)`: the input's channels repeated in DepthToSpace's
//! order by a constant 0/1 weight `E`, added before the shuffle. Exact (each output is 1·x
//! plus zeros), and no Resize is left: ONNX Runtime's NHWC kernel set has none, and its
//! transpose optimizer does not move transposes through one. A model it does not apply to
//! stays as it was (the same bytes), and it says why.

use std::collections::HashSet;

use crate::error::Result;
use crate::graph::edit::{Rewritten, finish, fresh};
use crate::graph::proto::{GraphProto, ModelProto, NodeProto, TensorProto, data_type};

/// Whether a nearest Resize by the integer factor `r` maps every output index `k·r + j`
/// (j < r) to input index `k` under coordinate mode `mode` and rounding `rounding`, by the
/// ONNX formulas: the source coordinate is `k + j/r` (asymmetric), `k + (j + ½)/r`
/// (tf_half_pixel_for_nn) or `k + (j + ½)/r − ½` (half_pixel, pytorch_half_pixel), and its
/// rounding must give `k` for every `j` (align_corners depends on the size: never).
fn nearest_is_repeat(mode: &str, rounding: &str, r: i64) -> bool {
    (0..r).all(|j| {
        let (j, r) = (j as f64, r as f64);
        let offset = match mode {
            "asymmetric" => j / r,
            "tf_half_pixel_for_nn" => (j + 0.5) / r,
            "half_pixel" | "pytorch_half_pixel" => (j + 0.5) / r - 0.5,
            _ => return false,
        };
        let rounded = match rounding {
            "floor" => offset.floor(),
            "ceil" => offset.ceil(),
            "round_prefer_floor" => (offset - 0.5).ceil(),
            "round_prefer_ceil" => (offset + 0.5).floor(),
            _ => return false,
        };
        rounded == 0.0
    })
}

/// Rewrites each nearest-upsample skip `Add(DepthToSpace(c, r), Resize(x, ×r, nearest))`
/// as `DepthToSpace(Add(c, Conv(x, E)), r)`, `E` the `[C·r², C, 1, 1]` 0/1 weight that
/// repeats each channel of `x` where DepthToSpace's mode reads it: channel `ch` to
/// `ch·r² + m` for CRD, to `m·C + ch` for DCR (m < r²). Folding `E` into the producer of
/// `c` is not possible in general: that Conv reads another tensor than `x`.
pub(crate) fn fold_upsample_skip(model: &[u8]) -> Result<Rewritten> {
    let mut m = ModelProto::decode_model(model, "being rewritten")?;
    let (mut changes, mut skipped) = (Vec::new(), Vec::new());
    let opset = m.opset("").unwrap_or(1);
    let Some(g) = m.graph.as_mut() else { return Ok(finish(model, &m, changes, skipped)) };
    let mut used = HashSet::new();
    g.names(&mut used);
    let mut a = 0;
    while a < g.node.len() {
        if g.node[a].op() != "Add" || g.node[a].input.len() != 2 {
            a += 1;
            continue;
        }
        match skip_at(g, a, opset) {
            Ok(found) => {
                let add = g.node[a].name().to_string();
                changes.push(format!(
                    "Add `{add}`: DepthToSpace {} ×{} of `{}` plus a nearest ×{} Resize of `{}` → a channel repeat before it",
                    found.mode, found.r, found.c, found.r, found.x
                ));
                rewrite_skip(g, a, &found, &mut used);
            }
            Err(Some(why)) => skipped.push(format!("Add `{}`: {why}", g.node[a].name())),
            Err(None) => {}
        }
        a += 1;
    }
    Ok(finish(model, &m, changes, skipped))
}

/// A matched skip: the DepthToSpace and Resize nodes, their inputs, factor, mode and channels.
struct Skip {
    d2s: usize,
    resize: usize,
    c: String,
    x: String,
    r: i64,
    mode: String,
    channels: i64,
    /// The skip's element type (FLOAT or FLOAT16): the 1×1 weights are written in it.
    dtype: i32,
}

/// The skip whose Add is node `a`; `Err(None)` where the Add is not one, `Err(Some(why))`
/// where it looks like one but the rewrite would not be exact or cannot be made.
fn skip_at(g: &GraphProto, a: usize, opset: i64) -> std::result::Result<Skip, Option<String>> {
    let producer = |name: &str| g.node.iter().position(|n| n.output.iter().any(|o| o == name));
    let add = &g.node[a];
    let (p0, p1) = (producer(&add.input[0]), producer(&add.input[1]));
    let (d2s, resize) = match (p0, p1) {
        (Some(i), Some(j)) if g.node[i].op() == "DepthToSpace" && g.node[j].op() == "Resize" => (i, j),
        (Some(i), Some(j)) if g.node[j].op() == "DepthToSpace" && g.node[i].op() == "Resize" => (j, i),
        _ => return Err(None),
    };
    let (dn, rn) = (&g.node[d2s], &g.node[resize]);
    let r = dn.int("blocksize").unwrap_or(0);
    let mode = dn.string("mode").unwrap_or_else(|| "DCR".into());
    if opset < 11 {
        return Err(Some(format!("Resize of opset {opset} (the rewrite reads opset 11's inputs)")));
    }
    if rn.string("mode").as_deref() != Some("nearest") {
        return Err(Some("the Resize is not nearest".into()));
    }
    let ctm = rn.string("coordinate_transformation_mode").unwrap_or_else(|| "half_pixel".into());
    let rounding = rn.string("nearest_mode").unwrap_or_else(|| "round_prefer_floor".into());
    if !nearest_is_repeat(&ctm, &rounding, r) {
        return Err(Some(format!("a nearest Resize with {ctm} and {rounding} does not repeat each pixel {r} times")));
    }
    if rn.int("antialias").unwrap_or(0) != 0 || rn.attr("axes").is_some() {
        return Err(Some("the Resize has antialias or axes".into()));
    }
    let constant = |name: &str| g.initializer.iter().find(|t| t.name() == name);
    let roi_empty = rn.input_at(1).is_none_or(|roi| constant(roi).is_some_and(|t| t.elements() == 0));
    let scales = rn.input_at(2).and_then(constant).and_then(|t| t.floats().ok());
    if !roi_empty || rn.input_at(3).is_some() || scales != Some(vec![1.0, 1.0, r as f32, r as f32]) {
        return Err(Some(format!(
            "the Resize's scales are not a constant [1, 1, {r}, {r}] (DepthToSpace's blocksize)"
        )));
    }
    let used_once = |name: &str| g.node.iter().flat_map(|n| &n.input).filter(|i| *i == name).count() == 1;
    let outputs: Vec<&str> = g.output.iter().map(|v| v.name()).collect();
    for n in [dn, rn] {
        if !used_once(&n.output[0]) || outputs.contains(&n.output[0].as_str()) {
            return Err(Some(format!("`{}` is read elsewhere too", n.output[0])));
        }
    }
    let c = dn.input[0].clone();
    // The shuffled tensor's channels and type: its Conv's weight, or its declaration.
    let weight =
        producer(&c).filter(|&p| g.node[p].op() == "Conv").and_then(|p| g.node[p].input_at(1).and_then(constant));
    let declaration = g.value_info.iter().find(|v| v.name() == c);
    let declared = declaration.and_then(|v| v.dims()).and_then(|d| d.get(1).copied()?);
    let Some(rows) = weight.and_then(|w| w.dims.first().copied()).or(declared) else {
        return Err(Some(format!("the channels of `{c}` are not known")));
    };
    let dtype = match weight.map(|w| w.dtype()).or_else(|| declaration.and_then(|v| v.elem_type())) {
        Some(t @ (data_type::FLOAT | data_type::FLOAT16)) => t,
        Some(t) => return Err(Some(format!("`{c}` is of ONNX type {t}, neither float nor float16"))),
        None => return Err(Some(format!("the type of `{c}` is not known"))),
    };
    if r < 1 || rows % (r * r) != 0 || !(mode == "CRD" || mode == "DCR") {
        return Err(Some(format!("DepthToSpace {mode} ×{r} of {rows} channels")));
    }
    Ok(Skip { d2s, resize, c, x: rn.input[0].clone(), r, mode, channels: rows / (r * r), dtype })
}

/// Replaces the Add `a` of `s` (and its DepthToSpace and Resize) by Conv, Add, DepthToSpace.
fn rewrite_skip(g: &mut GraphProto, a: usize, s: &Skip, used: &mut HashSet<String>) {
    let (r2, ch) = (s.r * s.r, s.channels);
    let mut e = vec![0f32; (ch * r2 * ch) as usize];
    for c in 0..ch {
        for m in 0..r2 {
            let row = if s.mode == "CRD" { c * r2 + m } else { m * ch + c };
            e[(row * ch + c) as usize] = 1.0;
        }
    }
    let add_name = g.node[a].name().to_string();
    let base = if add_name.is_empty() { g.node[a].output[0].clone() } else { add_name };
    let weight = fresh(used, &format!("{base}_repeat_weight"));
    // Ones and zeros: exact in either type.
    let dims = vec![ch * r2, ch, 1, 1];
    g.initializer.push(if s.dtype == data_type::FLOAT16 {
        TensorProto::from_floats_as_halves(&weight, dims, &e)
    } else {
        TensorProto::from_floats(&weight, dims, &e)
    });
    let repeated = fresh(used, &format!("{base}_repeated"));
    let conv = NodeProto::new(
        "Conv",
        fresh(used, &format!("{base}_repeat")),
        vec![s.x.clone(), weight],
        vec![repeated.clone()],
    );
    let summed = fresh(used, &format!("{base}_before_shuffle"));
    let mut add = g.node[a].clone();
    add.input = vec![s.c.clone(), repeated];
    let output = std::mem::replace(&mut add.output, vec![summed.clone()]);
    let mut d2s = g.node[s.d2s].clone();
    d2s.input = vec![summed];
    d2s.output = output;
    // The Add's place takes the three (every input of them is made before it); the old
    // DepthToSpace and Resize go.
    g.node.splice(a..=a, [conv, add, d2s]);
    let (first, second) = if s.d2s > s.resize { (s.d2s, s.resize) } else { (s.resize, s.d2s) };
    let removed = [g.node.remove(first), g.node.remove(second)];
    // Their outputs' declarations and the constants only they read go too.
    let gone: HashSet<&String> = removed.iter().flat_map(|n| &n.output).collect();
    g.value_info.retain(|v| v.name.as_ref().is_none_or(|n| !gone.contains(n)));
    let outputs = g.output.iter().filter_map(|v| v.name.clone());
    let read: HashSet<String> = g.node.iter().flat_map(|n| n.input.iter().cloned()).chain(outputs).collect();
    if g.node.iter().any(|n| n.attribute.iter().any(|a| a.g.is_some() || !a.graphs.is_empty())) {
        return; // subgraphs may read them
    }
    let orphans: HashSet<&String> = removed.iter().flat_map(|n| &n.input).filter(|i| !read.contains(*i)).collect();
    g.initializer.retain(|t| t.name.as_ref().is_none_or(|n| !orphans.contains(n)));
}

#[cfg(test)]
mod tests;
