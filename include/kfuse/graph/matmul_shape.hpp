#pragma once
// The shapes of a matmul node (NumPy matmul rules) as a batched GEMM problem: plain code shared
// by the plan compiler (graph/ops/matmul.hpp) and the ONNX importer.
#include <array>
#include <string>
#include <vector>

#include "kfuse/kernels/gemm/batched_gemm_problem.hpp"

namespace kfuse {

/// The batched product of a matmul node, from its operands' shapes (dense, row-major).
struct matmul_geometry {
  batched_gemm_problem problem;
  std::vector<index_t> out_shape;
  std::string error;  // empty: the shapes multiply
};

inline matmul_geometry matmul_geometry_of(const std::vector<index_t>& as,
                                          const std::vector<index_t>& bs) {
  matmul_geometry g;
  if (as.empty() || bs.empty()) {
    g.error = "an operand is a scalar";
    return g;
  }
  std::vector<index_t> a = as, b = bs;
  const bool a_vec = a.size() == 1, b_vec = b.size() == 1;
  if (a_vec) a.insert(a.begin(), 1);
  if (b_vec) b.push_back(1);
  const std::size_t ar = a.size() - 2, br = b.size() - 2, r = std::max(ar, br);
  if (r > std::size_t(batched_gemm_problem::max_batch_rank)) {
    g.error =
        "more than " + std::to_string(batched_gemm_problem::max_batch_rank) + " batch dimensions";
    return g;
  }
  batched_gemm_problem& p = g.problem;
  p.m = a[ar];
  p.k = a[ar + 1];
  p.n = b[br + 1];
  if (b[br] != p.k) {
    g.error = "a has " + std::to_string(p.k) + " columns, b has " + std::to_string(b[br]) + " rows";
    return g;
  }
  p.batch_rank = int(r);
  index_t sa = p.m * p.k, sb = p.k * p.n, sc = p.m * p.n;
  for (std::size_t i = r; i-- > 0;) {  // right-aligned batch dims
    const index_t da = i + ar >= r ? a[i + ar - r] : 1, db = i + br >= r ? b[i + br - r] : 1;
    if (da != db && da != 1 && db != 1) {
      g.error = "batch dimensions " + std::to_string(da) + " and " + std::to_string(db) +
                " do not broadcast";
      return g;
    }
    const index_t d = std::max(da, db);
    p.batch[i] = d;
    p.a_batch[i] = da == 1 ? 0 : sa;
    p.b_batch[i] = db == 1 ? 0 : sb;
    p.c_batch[i] = sc;
    sa *= da;
    sb *= db;
    sc *= d;
  }
  p.a_row = p.k;
  p.a_col = 1;
  p.b_row = p.n;
  p.b_col = 1;
  p.c_row = p.n;
  g.out_shape.assign(p.batch.begin(), p.batch.begin() + p.batch_rank);
  if (!a_vec) g.out_shape.push_back(p.m);
  if (!b_vec) g.out_shape.push_back(p.n);
  return g;
}

/// The same product with the operands read through strides: one stride (elements) per
/// dimension of `as` / `bs` (a view of other data; empty: dense row-major).
inline matmul_geometry matmul_geometry_of(const std::vector<index_t>& as,
                                          const std::vector<index_t>& bs,
                                          const std::vector<index_t>& a_strides,
                                          const std::vector<index_t>& b_strides) {
  matmul_geometry g = matmul_geometry_of(as, bs);
  if (!g.error.empty()) return g;
  batched_gemm_problem& p = g.problem;
  const int r = p.batch_rank;
  // A 1-D a gains a leading row, a 1-D b a trailing column: their strides do not matter.
  auto place = [&](std::vector<index_t> dims, std::vector<index_t> st, bool lead,
                   std::array<index_t, batched_gemm_problem::max_batch_rank>& batch, index_t& row,
                   index_t& col) {
    if (dims.size() == 1) {
      dims.insert(lead ? dims.begin() : dims.end(), 1);
      st.insert(lead ? st.begin() : st.end(), 0);
    }
    const int own = int(dims.size()) - 2;
    row = st[std::size_t(own)];
    col = st[std::size_t(own) + 1];
    for (int i = 0; i < r; ++i) {
      const int d = i + own - r;
      batch[std::size_t(i)] = d >= 0 && dims[std::size_t(d)] != 1 ? st[std::size_t(d)] : 0;
    }
  };
  if (!a_strides.empty()) place(as, a_strides, true, p.a_batch, p.a_row, p.a_col);
  if (!b_strides.empty()) place(bs, b_strides, false, p.b_batch, p.b_row, p.b_col);
  return g;
}

}  // namespace kfuse
