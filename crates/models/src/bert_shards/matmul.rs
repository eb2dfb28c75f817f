//! Matrix products on the calling thread, as candle custom ops.
//!
//! - candle's own `matmul` asks for its thread count on every call, and on
//!   Linux that reads and parses `/proc/cpuinfo` (`num_cpus::get_physical`):
//!   about 10% of a sharded query's forward pass, measured with perf. The
//!   shards already own one core each, so their products run on gemm (the
//!   kernel candle's `matmul` calls) with no parallelism and no probe.
//! - A query's forward pass streams all 42 MB of linear weights, more than
//!   the L3 cache, so each weight comes from memory once per pass. gemm reads
//!   16 output features at a time along the input dimension; in `Wᵀ` those
//!   16 values sit a whole row (up to 6 KB) apart from the next ones, which
//!   the prefetchers follow poorly. [`PanelWeights`] stores `Wᵀ` as panels of
//!   [`PANEL`] output features, each `k × PANEL` and contiguous, so the
//!   reads walk forward in steps of 128 bytes. Measured on one core, 24 rows
//!   × 384 → 768 with 33 MB of distinct weights cycled: 381 µs per product
//!   from `Wᵀ`, 282 µs from panels (176 µs when the weights stay cached).

use candle_core::{CpuStorage, CustomOp1, CustomOp2, Layout, Shape, Tensor};

/// Output features per weight panel.
const PANEL: usize = 32;

/// `a · b` for f32 tensors: `a` is `(batch…, m, k)`, `b` is `(k, n)` or
/// `(batch…, k, n)` with `a`'s batch dimensions. Any strides.
pub(super) fn matmul(a: &Tensor, b: &Tensor) -> candle_core::Result<Tensor> {
    a.apply_op2_no_bwd(b, &OneThreadMatMul)
}

/// `v` as a gemm stride.
fn stride(v: usize) -> candle_core::Result<isize> {
    isize::try_from(v).map_err(|_| candle_core::Error::Msg(format!("stride {v} overflows")))
}

/// `dst = lhs · rhs` on the calling thread, for an `m × k` lhs and a `k × n`
/// rhs given by pointer and (row, column) strides, into a row-major `dst`
/// with row stride `dst_rs`.
///
/// # Safety
/// Every element `ptr + i·rs + j·cs` of both operands must be readable and
/// every element of the `m × n` block at `dst` writable, and `dst` must not
/// alias either operand.
#[allow(unsafe_code)]
unsafe fn gemm_one_thread(
    (m, n, k): (usize, usize, usize),
    dst: *mut f32,
    dst_rs: isize,
    (lhs, lhs_rs, lhs_cs): (*const f32, isize, isize),
    (rhs, rhs_rs, rhs_cs): (*const f32, isize, isize),
) {
    // SAFETY: the caller's contract is gemm's.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            dst,
            1,
            dst_rs,
            false,
            lhs,
            lhs_cs,
            lhs_rs,
            rhs,
            rhs_cs,
            rhs_rs,
            0.0,
            1.0,
            false,
            false,
            false,
            gemm::Parallelism::None,
        )
    }
}

struct OneThreadMatMul;

/// A matrix operand: where each batch item starts, and its row and column
/// strides.
struct Operand {
    offsets: Vec<usize>,
    row_stride: isize,
    col_stride: isize,
}

fn operand(layout: &Layout, batch: &[usize], broadcast: bool) -> candle_core::Result<Operand> {
    let dims = layout.dims();
    let strides = layout.stride();
    let rank = dims.len();
    let batch_strides: &[usize] = if broadcast { &[] } else { &strides[..rank - 2] };
    let mut offsets = Vec::with_capacity(batch.iter().product());
    let mut index = vec![0usize; batch.len()];
    loop {
        let offset = batch_strides
            .iter()
            .zip(&index)
            .map(|(s, i)| s * i)
            .sum::<usize>();
        offsets.push(layout.start_offset() + offset);
        // Next batch index, last dimension fastest.
        let mut d = batch.len();
        loop {
            if d == 0 {
                return Ok(Operand {
                    offsets,
                    row_stride: stride(strides[rank - 2])?,
                    col_stride: stride(strides[rank - 1])?,
                });
            }
            d -= 1;
            index[d] += 1;
            if index[d] < batch[d] {
                break;
            }
            index[d] = 0;
        }
    }
}

impl CustomOp2 for OneThreadMatMul {
    fn name(&self) -> &'static str {
        "one-thread-matmul"
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let (CpuStorage::F32(a), CpuStorage::F32(b)) = (s1, s2) else {
            candle_core::bail!("one-thread matmul takes f32 tensors");
        };
        let (a_dims, b_dims) = (l1.dims(), l2.dims());
        let (ra, rb) = (a_dims.len(), b_dims.len());
        if ra < 2 || rb < 2 {
            candle_core::bail!("matmul of shapes {a_dims:?} and {b_dims:?}");
        }
        let (m, k) = (a_dims[ra - 2], a_dims[ra - 1]);
        let (k2, n) = (b_dims[rb - 2], b_dims[rb - 1]);
        let batch = &a_dims[..ra - 2];
        let broadcast_b = rb == 2;
        if k != k2 || (!broadcast_b && &b_dims[..rb - 2] != batch) {
            candle_core::bail!("matmul of shapes {a_dims:?} and {b_dims:?}");
        }
        let mut shape = batch.to_vec();
        shape.extend([m, n]);
        if shape.contains(&0) || k == 0 {
            let zeros = vec![0f32; shape.iter().product()];
            return Ok((CpuStorage::F32(zeros), Shape::from(shape)));
        }
        let lhs = operand(l1, batch, false)?;
        let rhs = operand(l2, batch, broadcast_b)?;
        let items = lhs.offsets.len();
        let mut out = vec![0f32; items * m * n];
        let n_stride = stride(n)?;
        #[allow(unsafe_code)]
        for (item, dst) in out.chunks_mut(m * n).enumerate() {
            let a_start = lhs.offsets[item];
            let b_start = rhs.offsets[if broadcast_b { 0 } else { item }];
            // SAFETY: candle's layouts describe views inside their storage,
            // so every element gemm reads, `start + i·row_stride +
            // j·col_stride` for i < m (k) and j < k (n), lies in `a` (`b`);
            // `dst` is a contiguous m × n block of `out`. gemm writes only
            // `dst` and reads `a` and `b`, which do not alias it.
            unsafe {
                gemm_one_thread(
                    (m, n, k),
                    dst.as_mut_ptr(),
                    n_stride,
                    (a[a_start..].as_ptr(), lhs.row_stride, lhs.col_stride),
                    (b[b_start..].as_ptr(), rhs.row_stride, rhs.col_stride),
                );
            }
        }
        Ok((CpuStorage::F32(out), Shape::from(shape)))
    }
}

/// A linear layer's `Wᵀ` (`k × n`) stored as panels of [`PANEL`] output
/// features, each a contiguous `k × width` block (the last may be narrower).
pub(super) struct PanelWeights {
    panels: Vec<f32>,
    k: usize,
    n: usize,
}

impl PanelWeights {
    /// Rearranges `wt`, a `k × n` f32 tensor with any strides.
    pub(super) fn new(wt: &Tensor) -> candle_core::Result<Self> {
        let (k, n) = wt.dims2()?;
        let rows = wt.to_vec2::<f32>()?;
        let mut panels = Vec::with_capacity(k * n);
        for start in (0..n).step_by(PANEL) {
            let end = (start + PANEL).min(n);
            for row in &rows {
                panels.extend_from_slice(&row[start..end]);
            }
        }
        Ok(PanelWeights { panels, k, n })
    }

    /// `x · Wᵀ` for a 2-D f32 `x` of `rows × k`, with any strides.
    pub(super) fn apply(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        x.apply_op1_no_bwd(self)
    }
}

impl CustomOp1 for PanelWeights {
    fn name(&self) -> &'static str {
        "panel-linear"
    }

    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> candle_core::Result<(CpuStorage, Shape)> {
        let CpuStorage::F32(x) = s else {
            candle_core::bail!("panel linear takes an f32 input");
        };
        let (rows, k) = l.shape().dims2()?;
        if k != self.k {
            candle_core::bail!("panel linear of {} inputs applied to {k}", self.k);
        }
        let n = self.n;
        let mut out = vec![0f32; rows * n];
        if rows == 0 || n == 0 || k == 0 {
            return Ok((CpuStorage::F32(out), Shape::from((rows, n))));
        }
        let (x_rs, x_cs) = (stride(l.stride()[0])?, stride(l.stride()[1])?);
        let out_rs = stride(n)?;
        let x = &x[l.start_offset()..];
        for start in (0..n).step_by(PANEL) {
            let width = PANEL.min(n - start);
            let panel = &self.panels[start * k..(start + width) * k];
            let width_stride = stride(width)?;
            // SAFETY: `x`'s layout lies inside its storage (candle's
            // invariant), so gemm's reads of `rows × k` elements at
            // `x_rs`/`x_cs` stay in `x`; `panel` is exactly `k × width`
            // elements, row stride `width`; the destination is the `rows ×
            // width` block of `out` starting at column `start`, row stride
            // `n`, which `out` (`rows × n`) contains. Nothing aliases `out`.
            #[allow(unsafe_code)]
            unsafe {
                gemm_one_thread(
                    (rows, width, k),
                    out[start..].as_mut_ptr(),
                    out_rs,
                    (x.as_ptr(), x_rs, x_cs),
                    (panel.as_ptr(), width_stride, 1),
                );
            }
        }
        Ok((CpuStorage::F32(out), Shape::from((rows, n))))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use candle_core::{Device, IndexOp};

    fn close(a: &Tensor, b: &Tensor) -> bool {
        let d = (a - b).unwrap().abs().unwrap().flatten_all().unwrap();
        d.max(0).unwrap().to_scalar::<f32>().unwrap() < 1e-4
    }

    #[test]
    fn matches_candle_on_views_and_batches() {
        let dev = Device::Cpu;
        let a = Tensor::randn(0f32, 1.0, (2, 3, 5, 7), &dev).unwrap();
        let b = Tensor::randn(0f32, 1.0, (2, 3, 7, 4), &dev).unwrap();
        let w = Tensor::randn(0f32, 1.0, (7, 6), &dev).unwrap();
        // Batched, with a transposed right-hand side as attention uses it.
        assert!(close(&matmul(&a, &b).unwrap(), &a.matmul(&b).unwrap()));
        let bt = b
            .transpose(2, 3)
            .unwrap()
            .contiguous()
            .unwrap()
            .t()
            .unwrap();
        assert!(close(&matmul(&a, &bt).unwrap(), &a.matmul(&b).unwrap()));
        // A 2-D weight, and column views of one.
        let x = a.i((1, 2)).unwrap();
        assert!(close(&matmul(&x, &w).unwrap(), &x.matmul(&w).unwrap()));
        let cols = w.narrow(1, 2, 3).unwrap();
        let expected = x.matmul(&cols.contiguous().unwrap()).unwrap();
        assert!(close(&matmul(&x, &cols).unwrap(), &expected));
        // A 2-D weight shared by every batch item.
        let shared = a.broadcast_matmul(&w).unwrap();
        assert!(close(&matmul(&a, &w).unwrap(), &shared));
    }

    #[test]
    fn panels_match_a_plain_product() {
        let dev = Device::Cpu;
        // 70 features: two full panels and a narrow one.
        let wt = Tensor::randn(0f32, 1.0, (9, 70), &dev).unwrap();
        let x = Tensor::randn(0f32, 1.0, (5, 9), &dev).unwrap();
        let panels = PanelWeights::new(&wt).unwrap();
        assert!(close(&panels.apply(&x).unwrap(), &x.matmul(&wt).unwrap()));
        // A strided input, and a weight given as a view.
        let xt = x.t().unwrap().contiguous().unwrap().t().unwrap();
        assert!(close(&panels.apply(&xt).unwrap(), &x.matmul(&wt).unwrap()));
        let view = PanelWeights::new(&wt.narrow(1, 3, 40).unwrap()).unwrap();
        let expected = x.matmul(&wt.narrow(1, 3, 40).unwrap().contiguous().unwrap());
        assert!(close(&view.apply(&x).unwrap(), &expected.unwrap()));
        assert!(panels.apply(&wt).is_err());
    }

    #[test]
    fn rejects_mismatched_shapes() {
        let dev = Device::Cpu;
        let a = Tensor::zeros((3, 4), candle_core::DType::F32, &dev).unwrap();
        let b = Tensor::zeros((5, 2), candle_core::DType::F32, &dev).unwrap();
        assert!(matmul(&a, &b).is_err());
        let batched = Tensor::zeros((2, 4, 2), candle_core::DType::F32, &dev).unwrap();
        let other = Tensor::zeros((3, 3, 4), candle_core::DType::F32, &dev).unwrap();
        assert!(matmul(&other, &batched).is_err());
        let empty = Tensor::zeros((0, 4), candle_core::DType::F32, &dev).unwrap();
        let product = matmul(&empty, &a.t().unwrap()).unwrap();
        assert_eq!(product.dims(), &[0, 3]);
        let ints = Tensor::zeros((3, 4), candle_core::DType::U32, &dev).unwrap();
        assert!(matmul(&ints, &ints.t().unwrap()).is_err());
    }
}
