// Resize (opset 10 to 17) and Upsample: nearest, bilinear and bicubic resampling of H and W of
// an image -> the graph's resize (nearest, linear, cubic), every coordinate mode including
// tf_crop_and_resize (a region of interest on H and W). N / C scaling is refused.
#include <cmath>

#include "ops.hpp"

namespace kfuse::onnx::detail {

namespace {

resize_coords coords_of(const context& cx, const node_proto& n, const std::string& m) {
  if (m == "half_pixel") return resize_coords::half_pixel;
  if (m == "pytorch_half_pixel") return resize_coords::pytorch_half_pixel;
  if (m == "align_corners") return resize_coords::align_corners;
  if (m == "asymmetric") return resize_coords::asymmetric;
  if (m == "tf_half_pixel_for_nn") return resize_coords::tf_half_pixel_for_nn;
  if (m == "tf_crop_and_resize") return resize_coords::tf_crop_and_resize;
  cx.fail(n, "coordinate_transformation_mode='" + m + "' is not supported");
}

resize_rounding rounding_of(const context& cx, const node_proto& n, const std::string& m) {
  if (m == "round_prefer_floor") return resize_rounding::round_prefer_floor;
  if (m == "round_prefer_ceil") return resize_rounding::round_prefer_ceil;
  if (m == "floor") return resize_rounding::floor;
  if (m == "ceil") return resize_rounding::ceil;
  cx.fail(n, "nearest_mode='" + m + "' is not supported");
}

}  // namespace

void import_resize(context& cx, const node_proto& n) {
  const bool upsample = n.op_type() == "Upsample";
  if (upsample)
    cx.only_attrs(n, {"mode", "scales", "height_scale", "width_scale"});
  else
    cx.only_attrs(n, {"mode", "coordinate_transformation_mode", "nearest_mode", "cubic_coeff_a",
                      "exclude_outside", "extrapolation_value", "antialias", "axes",
                      "keep_aspect_ratio_policy"});
  // Opset 18's additions, at their defaults only (antialiased downscaling, partial axes and
  // aspect-ratio policies are not implemented).
  if (cx.attr_int(n, "antialias", 0) != 0) cx.fail(n, "antialias=1 is not supported");
  if (cx.attr(n, "axes")) cx.fail(n, "the axes attribute is not supported (give every axis)");
  if (cx.attr_string(n, "keep_aspect_ratio_policy", "stretch") != "stretch")
    cx.fail(n, "keep_aspect_ratio_policy other than 'stretch' is not supported");
  run_value x = cx.float_in(n, 0);
  if (x.shape.size() != 4)
    cx.fail(n, "input " + shape_str(x.shape) + ": kfuse resizes 4-D images (N, C, H, W)");
  const std::string mode = cx.attr_string(n, "mode", "nearest");
  if (mode != "nearest" && mode != "linear" && mode != "bilinear" && mode != "cubic")
    cx.fail(n, "mode='" + mode + "' is not supported (nearest, linear, cubic)");
  // Scales or sizes: an attribute (Upsample-7), input 1 (Upsample-9, Resize-10) or inputs 2 / 3.
  std::vector<double> scales;
  std::vector<index_t> sizes;
  resize_params p;
  const bool crop = !upsample && cx.opset >= 11 &&
                    cx.attr_string(n, "coordinate_transformation_mode", "") == "tf_crop_and_resize";
  auto float_list = [&](int k, const char* what) {
    const const_value& c = cx.const_in(n, k, what);
    std::vector<double> v;
    for (index_t i = 0; i < c.numel(); ++i) v.push_back(c.at(i));
    return v;
  };
  if (upsample && cx.opset < 9) {
    if (const auto* a = cx.attr(n, "scales"))
      for (float f : a->floats()) scales.push_back(f);
  } else if (upsample || cx.opset < 11) {
    scales = float_list(1, "scales");
  } else {
    if (crop) {
      // roi: the starts of every axis, then their ends (fractions of the input).
      if (!cx.has_input(n, 1)) cx.fail(n, "tf_crop_and_resize needs the roi input");
      const const_value& roi = cx.const_in(n, 1, "roi");
      if (roi.numel() != 8) cx.fail(n, "roi must have 8 values (4 starts, 4 ends)");
      for (int a = 0; a < 2; ++a)
        if (roi.at(a) != 0 || roi.at(a + 4) != 1)
          cx.fail(n, "a region of interest on N or C is not supported");
      for (index_t i = 0; i < 8; ++i)
        if (!std::isfinite(roi.at(i))) cx.fail(n, "roi values must be finite");
      p.roi_h0 = roi.at(2);
      p.roi_w0 = roi.at(3);
      p.roi_h1 = roi.at(6);
      p.roi_w1 = roi.at(7);
    }
    if (cx.has_input(n, 2) && cx.in(n, 2).is_const && cx.in(n, 2).c.numel() > 0)
      scales = float_list(2, "scales");
    else if (cx.has_input(n, 3))
      for (std::int64_t v : cx.ints_in(n, 3, "sizes")) sizes.push_back(v);
    else
      cx.fail(n, "needs scales or sizes");
  }
  if (!sizes.empty()) {
    if (sizes.size() != 4) cx.fail(n, "sizes must have 4 values");
    if (sizes[0] != x.shape[0] || sizes[1] != x.shape[1])
      cx.fail(n, "resizing N or C is not supported");
    p.out_h = sizes[2];
    p.out_w = sizes[3];
    p.scale_h = double(p.out_h) / double(x.shape[2]);
    p.scale_w = double(p.out_w) / double(x.shape[3]);
  } else {
    if (scales.size() != 4) cx.fail(n, "scales must have 4 values");
    if (scales[0] != 1 || scales[1] != 1) cx.fail(n, "resizing N or C is not supported");
    if (!(scales[2] > 0) || !(scales[3] > 0) || scales[2] > 1e6 || scales[3] > 1e6)
      cx.fail(n, "scales must be positive");
    p.scale_h = scales[2];
    p.scale_w = scales[3];
    // A cropped axis: floor(in * (roi end - roi start) * scale).
    p.out_h = index_t(std::floor(double(x.shape[2]) * (p.roi_h1 - p.roi_h0) * scales[2]));
    p.out_w = index_t(std::floor(double(x.shape[3]) * (p.roi_w1 - p.roi_w0) * scales[3]));
  }
  if (p.out_h < 1 || p.out_w < 1) cx.fail(n, "the output would be empty");
  p.mode = mode == "nearest" ? resize_mode::nearest
           : mode == "cubic" ? resize_mode::cubic
                             : resize_mode::linear;
  p.cubic_a = cx.attr_float(n, "cubic_coeff_a", -0.75f);
  p.exclude_outside = cx.attr_int(n, "exclude_outside", 0) != 0;
  if (!std::isfinite(p.cubic_a)) cx.fail(n, "cubic_coeff_a must be finite");
  if (upsample || cx.opset < 11) {  // Upsample and Resize-10: asymmetric; nearest rounds down
    p.coords = resize_coords::asymmetric;
    p.rounding = resize_rounding::floor;
  } else {
    p.coords = coords_of(cx, n, cx.attr_string(n, "coordinate_transformation_mode", "half_pixel"));
    p.rounding = rounding_of(cx, n, cx.attr_string(n, "nearest_mode", "round_prefer_floor"));
    p.extrapolation = cx.attr_float(n, "extrapolation_value", 0.f);
  }
  x = cx.as_image(x, n.output(0));
  run_value y = x;
  y.id = cx.g.resize(cx.out_name(n), x.id, p);
  y.shape = {x.shape[0], x.shape[1], p.out_h, p.out_w};
  cx.set_run(n, 0, y);
}

}  // namespace kfuse::onnx::detail
