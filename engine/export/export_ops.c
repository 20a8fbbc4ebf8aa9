/* export_ops.c — recorded torch calls as ATen C++ expressions.
 *
 * Which ops the exporter writes is data: one row per op, with the Python
 * signature the call was recorded against (parameter names in order, each
 * with its kind and default) and a template for the ATen call in which
 * `$name` stands for that parameter's C++ spelling. Positional and keyword
 * arguments are matched to the Python signature the way Python does, so
 * `F.conv2d(x, w, b, 1)` and `F.conv2d(x, w, stride=1, bias=b)` give the
 * same C++; the template then puts them in ATen's order (batch_norm's
 * running statistics come before its weight in Python, after it in ATen).
 *
 * Kinds: T tensor, T? optional tensor, TS tensor or scalar, TL list of
 * tensors, S / S? scalar, I / I? int, F / F? double, B bool, L int list
 * (L2 / L3: one int is repeated, as Python's conv and pool functions do;
 * L*: the remaining positional ints, `x.view(2, -1)`), L? optional list,
 * STR string, D? dtype, MF memory format, X accepted and ignored
 * (Python-only: `inplace`, `_stacklevel`), X0 must be absent, None or
 * False (`return_indices=True` would change the result). A default is the
 * protocol's encoding of the Python default (docs/protocol.md). */
#include "export_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* forms: 'F' torch.nn.functional.*, 'M' torch.Tensor.* (args[0] is self),
 * 'T' any other torch.*; "*" all three. */
static const export_op ops[] = {
    /* elementwise, one tensor */
    {"*", "relu", "input:T inplace:X", "at::relu($input)", 'T', 0},
    {"*", "sigmoid", "input:T", "at::sigmoid($input)", 'T', 0},
    {"*", "tanh", "input:T", "at::tanh($input)", 'T', 0},
    {"*", "exp", "input:T", "at::exp($input)", 'T', 0},
    {"*", "log", "input:T", "at::log($input)", 'T', 0},
    {"*", "log1p", "input:T", "at::log1p($input)", 'T', 0},
    {"*", "sqrt", "input:T", "at::sqrt($input)", 'T', 0},
    {"*", "rsqrt", "input:T", "at::rsqrt($input)", 'T', 0},
    {"*", "abs", "input:T", "at::abs($input)", 'T', 0},
    {"*", "neg", "input:T", "at::neg($input)", 'T', 0},
    {"*", "__neg__", "input:T", "at::neg($input)", 'T', 0},
    {"*", "reciprocal", "input:T", "at::reciprocal($input)", 'T', 0},
    {"*", "erf", "input:T", "at::erf($input)", 'T', 0},
    {"*", "sin", "input:T", "at::sin($input)", 'T', 0},
    {"*", "cos", "input:T", "at::cos($input)", 'T', 0},
    {"*", "floor", "input:T", "at::floor($input)", 'T', 0},
    {"*", "ceil", "input:T", "at::ceil($input)", 'T', 0},
    {"*", "sign", "input:T", "at::sign($input)", 'T', 0},
    {"*", "square", "input:T", "at::square($input)", 'T', 0},
    {"*", "silu", "input:T inplace:X", "at::silu($input)", 'T', 0},
    {"*", "mish", "input:T inplace:X", "at::mish($input)", 'T', 0},
    {"*", "hardswish", "input:T inplace:X", "at::hardswish($input)", 'T', 0},
    {"*", "hardsigmoid", "input:T inplace:X", "at::hardsigmoid($input)", 'T', 0},
    {"*", "relu6", "input:T inplace:X", "at::relu6($input)", 'T', 0},
    {"*", "selu", "input:T inplace:X", "at::selu($input)", 'T', 0},
    {"*", "gelu", "input:T approximate:STR=\"none\"", "at::gelu($input, $approximate)", 'T', 0},
    {"*", "leaky_relu", "input:T negative_slope:S=0.01 inplace:X",
     "at::leaky_relu($input, $negative_slope)", 'T', 0},
    {"*", "elu", "input:T alpha:S={\"float\":1.0} inplace:X", "at::elu($input, $alpha)", 'T', 0},
    {"*", "celu", "input:T alpha:S={\"float\":1.0} inplace:X", "at::celu($input, $alpha)", 'T', 0},
    {"*", "hardtanh", "input:T min_val:S={\"float\":-1.0} max_val:S={\"float\":1.0} inplace:X",
     "at::hardtanh($input, $min_val, $max_val)", 'T', 0},
    {"*", "softplus", "input:T beta:S={\"float\":1.0} threshold:S={\"float\":20.0}",
     "at::softplus($input, $beta, $threshold)", 'T', 0},
    {"*", "clamp", "input:T min:S? max:S?", "at::clamp($input, $min, $max)", 'T', 0},
    {"*", "clip", "input:T min:S? max:S?", "at::clamp($input, $min, $max)", 'T', 0},
    {"*", "clamp_min", "input:T min:S", "at::clamp_min($input, $min)", 'T', 0},
    {"*", "clamp_max", "input:T max:S", "at::clamp_max($input, $max)", 'T', 0},
    {"*", "dropout", "input:T p:F=0.5 training:B=true inplace:X", "at::dropout($input, $p, $training)", 'T', 0},
    /* binary arithmetic and comparisons (dunders, functions, methods, in-place forms) */
    {"*", "add", "input:T other:TS alpha:S=1", "at::add($input, $other, $alpha)", 'T', 0},
    {"*", "__add__", "input:T other:TS", "at::add($input, $other)", 'T', 0},
    {"*", "__radd__", "input:T other:TS", "at::add($input, $other)", 'T', 0},
    {"*", "__iadd__", "input:T other:TS", "at::add($input, $other)", 'T', 0},
    {"*", "sub", "input:T other:TS alpha:S=1", "at::sub($input, $other, $alpha)", 'T', 0},
    {"*", "__sub__", "input:T other:TS", "at::sub($input, $other)", 'T', 0},
    {"*", "__isub__", "input:T other:TS", "at::sub($input, $other)", 'T', 0},
    {"*", "__rsub__", "input:T other:TS", "at::rsub($input, $other)", 'T', 0},
    {"*", "rsub", "input:T other:TS alpha:S=1", "at::rsub($input, $other, $alpha)", 'T', 0},
    {"*", "mul", "input:T other:TS", "at::mul($input, $other)", 'T', 0},
    {"*", "__mul__", "input:T other:TS", "at::mul($input, $other)", 'T', 0},
    {"*", "__rmul__", "input:T other:TS", "at::mul($input, $other)", 'T', 0},
    {"*", "__imul__", "input:T other:TS", "at::mul($input, $other)", 'T', 0},
    {"*", "div", "input:T other:TS rounding_mode:STR?", "at::div($input, $other, $rounding_mode)", 'T', 0},
    {"*", "__truediv__", "input:T other:TS", "at::div($input, $other)", 'T', 0},
    {"*", "__itruediv__", "input:T other:TS", "at::div($input, $other)", 'T', 0},
    /* Python's __rtruediv__ is self.reciprocal() * other (torch/_tensor.py) */
    {"*", "__rtruediv__", "input:T other:TS", "at::mul(at::reciprocal($input), $other)", 'T', 0},
    {"*", "pow", "input:T exponent:TS", "at::pow($input, $exponent)", 'T', 0},
    {"*", "__pow__", "input:T exponent:TS", "at::pow($input, $exponent)", 'T', 0},
    {"*", "__rpow__", "input:T other:S", "at::pow($other, $input)", 'T', 0},
    {"*", "maximum", "input:T other:T", "at::maximum($input, $other)", 'T', 0},
    {"*", "minimum", "input:T other:T", "at::minimum($input, $other)", 'T', 0},
    {"*", "where", "condition:T input:TS other:TS", "at::where($condition, $input, $other)", 'T', 0},
    {"*", "masked_fill", "input:T mask:T value:TS", "at::masked_fill($input, $mask, $value)", 'T', 0},
    {"*", "__gt__", "input:T other:TS", "at::gt($input, $other)", 'T', 0},
    {"*", "__lt__", "input:T other:TS", "at::lt($input, $other)", 'T', 0},
    {"*", "__ge__", "input:T other:TS", "at::ge($input, $other)", 'T', 0},
    {"*", "__le__", "input:T other:TS", "at::le($input, $other)", 'T', 0},
    {"*", "__eq__", "input:T other:TS", "at::eq($input, $other)", 'T', 0},
    {"*", "__ne__", "input:T other:TS", "at::ne($input, $other)", 'T', 0},
    {"*", "gt", "input:T other:TS", "at::gt($input, $other)", 'T', 0},
    {"*", "lt", "input:T other:TS", "at::lt($input, $other)", 'T', 0},
    {"*", "ge", "input:T other:TS", "at::ge($input, $other)", 'T', 0},
    {"*", "le", "input:T other:TS", "at::le($input, $other)", 'T', 0},
    {"*", "eq", "input:T other:TS", "at::eq($input, $other)", 'T', 0},
    {"*", "ne", "input:T other:TS", "at::ne($input, $other)", 'T', 0},
    /* reductions and softmax */
    {"*", "sum", "input:T dim:L? keepdim:B=false dtype:D?", "at::sum($input, $dim, $keepdim, $dtype)", 'T', 0},
    {"*", "mean", "input:T dim:L? keepdim:B=false dtype:D?", "at::mean($input, $dim, $keepdim, $dtype)", 'T', 0},
    {"*", "amax", "input:T dim:L=[] keepdim:B=false", "at::amax($input, $dim, $keepdim)", 'T', 0},
    {"*", "amin", "input:T dim:L=[] keepdim:B=false", "at::amin($input, $dim, $keepdim)", 'T', 0},
    {"*", "logsumexp", "input:T dim:L keepdim:B=false", "at::logsumexp($input, $dim, $keepdim)", 'T', 0},
    {"*", "argmax", "input:T dim:I? keepdim:B=false", "at::argmax($input, $dim, $keepdim)", 'T', 0},
    {"*", "argmin", "input:T dim:I? keepdim:B=false", "at::argmin($input, $dim, $keepdim)", 'T', 0},
    {"*", "cumsum", "input:T dim:I dtype:D?", "at::cumsum($input, $dim, $dtype)", 'T', 0},
    {"F", "softmax", "input:T dim:I _stacklevel:X dtype:D?", "at::softmax($input, $dim, $dtype)", 'T', 0},
    {"*", "softmax", "input:T dim:I dtype:D?", "at::softmax($input, $dim, $dtype)", 'T', 0},
    {"F", "log_softmax", "input:T dim:I _stacklevel:X dtype:D?", "at::log_softmax($input, $dim, $dtype)", 'T', 0},
    {"*", "log_softmax", "input:T dim:I dtype:D?", "at::log_softmax($input, $dim, $dtype)", 'T', 0},
    /* matrix products */
    {"*", "linear", "input:T weight:T bias:T?", "at::linear($input, $weight, $bias)", 'T', 0},
    {"*", "matmul", "input:T other:T", "at::matmul($input, $other)", 'T', 0},
    {"*", "__matmul__", "input:T other:T", "at::matmul($input, $other)", 'T', 0},
    {"*", "mm", "input:T mat2:T", "at::mm($input, $mat2)", 'T', 0},
    {"*", "bmm", "input:T mat2:T", "at::bmm($input, $mat2)", 'T', 0},
    {"*", "addmm", "input:T mat1:T mat2:T beta:S=1 alpha:S=1", "at::addmm($input, $mat1, $mat2, $beta, $alpha)", 'T', 0},
    {"*", "baddbmm", "input:T batch1:T batch2:T beta:S=1 alpha:S=1",
     "at::baddbmm($input, $batch1, $batch2, $beta, $alpha)", 'T', 0},
    {"*", "scaled_dot_product_attention",
     "query:T key:T value:T attn_mask:T? dropout_p:F=0.0 is_causal:B=false scale:F?",
     "at::scaled_dot_product_attention($query, $key, $value, $attn_mask, $dropout_p, $is_causal, $scale)", 'T', 0},
    /* convolutions */
    {"*", "conv1d", "input:T weight:T bias:T? stride:L1=1 padding:L1=0 dilation:L1=1 groups:I=1",
     "at::conv1d($input, $weight, $bias, $stride, $padding, $dilation, $groups)", 'T', 0},
    {"*", "conv2d", "input:T weight:T bias:T? stride:L2=1 padding:L2=0 dilation:L2=1 groups:I=1",
     "at::conv2d($input, $weight, $bias, $stride, $padding, $dilation, $groups)", 'T', 0},
    {"*", "conv3d", "input:T weight:T bias:T? stride:L3=1 padding:L3=0 dilation:L3=1 groups:I=1",
     "at::conv3d($input, $weight, $bias, $stride, $padding, $dilation, $groups)", 'T', 0},
    {"*", "conv_transpose1d",
     "input:T weight:T bias:T? stride:L1=1 padding:L1=0 output_padding:L1=0 groups:I=1 dilation:L1=1",
     "at::conv_transpose1d($input, $weight, $bias, $stride, $padding, $output_padding, $groups, $dilation)", 'T', 0},
    {"*", "conv_transpose2d",
     "input:T weight:T bias:T? stride:L2=1 padding:L2=0 output_padding:L2=0 groups:I=1 dilation:L2=1",
     "at::conv_transpose2d($input, $weight, $bias, $stride, $padding, $output_padding, $groups, $dilation)", 'T', 0},
    {"*", "conv_transpose3d",
     "input:T weight:T bias:T? stride:L3=1 padding:L3=0 output_padding:L3=0 groups:I=1 dilation:L3=1",
     "at::conv_transpose3d($input, $weight, $bias, $stride, $padding, $output_padding, $groups, $dilation)", 'T', 0},
    /* norms: ATen updates the running statistics itself (flag M) */
    {"*", "batch_norm",
     "input:T running_mean:T? running_var:T? weight:T? bias:T? training:B=false momentum:F=0.1 eps:F=1e-05",
     "at::batch_norm($input, $weight, $bias, $running_mean, $running_var, $training, $momentum, $eps, true)", 'T',
     EXPORT_OP_SELF_MUTATES},
    {"*", "instance_norm",
     "input:T running_mean:T? running_var:T? weight:T? bias:T? use_input_stats:B=true momentum:F=0.1 eps:F=1e-05",
     "at::instance_norm($input, $weight, $bias, $running_mean, $running_var, $use_input_stats, $momentum, $eps, true)",
     'T', EXPORT_OP_SELF_MUTATES},
    {"*", "layer_norm", "input:T normalized_shape:L weight:T? bias:T? eps:F=1e-05",
     "at::layer_norm($input, $normalized_shape, $weight, $bias, $eps, true)", 'T', 0},
    {"*", "group_norm", "input:T num_groups:I weight:T? bias:T? eps:F=1e-05",
     "at::group_norm($input, $num_groups, $weight, $bias, $eps, true)", 'T', 0},
    {"*", "rms_norm", "input:T normalized_shape:L weight:T? eps:F?",
     "at::rms_norm($input, $normalized_shape, $weight, $eps)", 'T', 0},
    /* pools */
    {"*", "max_pool1d", "input:T kernel_size:L1 stride:L1=null padding:L1=0 dilation:L1=1 ceil_mode:B=false return_indices:X0",
     "at::max_pool1d($input, $kernel_size, $stride, $padding, $dilation, $ceil_mode)", 'T', 0},
    {"*", "max_pool2d", "input:T kernel_size:L2 stride:L2=null padding:L2=0 dilation:L2=1 ceil_mode:B=false return_indices:X0",
     "at::max_pool2d($input, $kernel_size, $stride, $padding, $dilation, $ceil_mode)", 'T', 0},
    {"*", "max_pool3d", "input:T kernel_size:L3 stride:L3=null padding:L3=0 dilation:L3=1 ceil_mode:B=false return_indices:X0",
     "at::max_pool3d($input, $kernel_size, $stride, $padding, $dilation, $ceil_mode)", 'T', 0},
    {"*", "avg_pool1d", "input:T kernel_size:L1 stride:L1=null padding:L1=0 ceil_mode:B=false count_include_pad:B=true",
     "at::avg_pool1d($input, $kernel_size, $stride, $padding, $ceil_mode, $count_include_pad)", 'T', 0},
    {"*", "avg_pool2d",
     "input:T kernel_size:L2 stride:L2=null padding:L2=0 ceil_mode:B=false count_include_pad:B=true divisor_override:I?",
     "at::avg_pool2d($input, $kernel_size, $stride, $padding, $ceil_mode, $count_include_pad, $divisor_override)", 'T', 0},
    {"*", "avg_pool3d",
     "input:T kernel_size:L3 stride:L3=null padding:L3=0 ceil_mode:B=false count_include_pad:B=true divisor_override:I?",
     "at::avg_pool3d($input, $kernel_size, $stride, $padding, $ceil_mode, $count_include_pad, $divisor_override)", 'T', 0},
    {"*", "adaptive_avg_pool1d", "input:T output_size:L1", "at::adaptive_avg_pool1d($input, $output_size)", 'T', 0},
    {"*", "adaptive_avg_pool2d", "input:T output_size:L2", "at::adaptive_avg_pool2d($input, $output_size)", 'T', 0},
    {"*", "adaptive_avg_pool3d", "input:T output_size:L3", "at::adaptive_avg_pool3d($input, $output_size)", 'T', 0},
    {"*", "adaptive_max_pool2d", "input:T output_size:L2 return_indices:X0",
     "std::get<0>(at::adaptive_max_pool2d($input, $output_size))", 'T', 0},
    /* shapes and data movement */
    {"M", "view", "input:T size:L*", "$input.view($size)", 'T', 0},
    {"M", "reshape", "input:T shape:L*", "at::reshape($input, $shape)", 'T', 0},
    {"T", "reshape", "input:T shape:L", "at::reshape($input, $shape)", 'T', 0},
    {"M", "permute", "input:T dims:L*", "at::permute($input, $dims)", 'T', 0},
    {"T", "permute", "input:T dims:L", "at::permute($input, $dims)", 'T', 0},
    {"M", "expand", "input:T size:L*", "$input.expand($size)", 'T', 0},
    {"M", "repeat", "input:T repeats:L*", "$input.repeat($repeats)", 'T', 0},
    {"*", "flatten", "input:T start_dim:I=0 end_dim:I=-1", "at::flatten($input, $start_dim, $end_dim)", 'T', 0},
    {"*", "transpose", "input:T dim0:I dim1:I", "at::transpose($input, $dim0, $dim1)", 'T', 0},
    {"*", "t", "input:T", "at::t($input)", 'T', 0},
    {"*", "unsqueeze", "input:T dim:I", "at::unsqueeze($input, $dim)", 'T', 0},
    {"*", "expand_as", "input:T other:T", "$input.expand_as($other)", 'T', 0},
    {"*", "view_as", "input:T other:T", "$input.view_as($other)", 'T', 0},
    {"*", "contiguous", "input:T memory_format:MF={\"memory_format\":\"contiguous_format\"}",
     "$input.contiguous($memory_format)", 'T', 0},
    {"*", "clone", "input:T memory_format:MF?", "at::clone($input, $memory_format)", 'T', 0},
    {"*", "detach", "input:T", "at::detach($input)", 'T', 0},
    {"M", "float", "input:T", "$input.to(at::kFloat)", 'T', 0},
    {"*", "cat", "tensors:TL dim:I=0", "at::cat($tensors, $dim)", 'T', 0},
    {"*", "concat", "tensors:TL dim:I=0", "at::cat($tensors, $dim)", 'T', 0},
    {"*", "stack", "tensors:TL dim:I=0", "at::stack($tensors, $dim)", 'T', 0},
    {"*", "chunk", "input:T chunks:I dim:I=0", "at::chunk($input, $chunks, $dim)", 'V', 0},
    {"*", "roll", "input:T shifts:L dims:L=[]", "at::roll($input, $shifts, $dims)", 'T', 0},
    {"*", "zeros_like", "input:T dtype:D? layout:X0 device:X0 requires_grad:X memory_format:X0",
     "at::zeros_like($input, at::TensorOptions().dtype($dtype))", 'T', 0},
    {"*", "ones_like", "input:T dtype:D? layout:X0 device:X0 requires_grad:X memory_format:X0",
     "at::ones_like($input, at::TensorOptions().dtype($dtype))", 'T', 0},
};

const export_op *export_op_find(const char *op, bool *inplace) {
  *inplace = false;
  static const char tensor[] = "torch.Tensor.", functional[] = "torch.nn.functional.";
  char form = 'T';
  if (strncmp(op, tensor, sizeof tensor - 1) == 0) form = 'M';
  else if (strncmp(op, functional, sizeof functional - 1) == 0) form = 'F';
  else if (strncmp(op, "torch.", 6) != 0) return NULL;
  const char *last = strrchr(op, '.') + 1;
  char name[128];
  snprintf(name, sizeof name, "%s", last);
  size_t n = strlen(name);
  /* relu_, add_: the in-place form of the op (dunders keep their name) */
  if (n > 1 && name[n - 1] == '_' && name[0] != '_') {
    name[n - 1] = '\0';
    *inplace = true;
  }
  if (strncmp(name, "__i", 3) == 0 && strcmp(name, "__index__") != 0) *inplace = true;
  for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
    if (strcmp(ops[i].name, name) == 0 && (ops[i].forms[0] == '*' || strchr(ops[i].forms, form)))
      return &ops[i];
  return NULL;
}

int export_op_count(void) { return (int)(sizeof ops / sizeof ops[0]); }
const export_op *export_op_at(int i) { return i >= 0 && i < export_op_count() ? &ops[i] : NULL; }

/* ---- arguments ------------------------------------------------------------ */

static bool is_tensor(const cJSON *a) {
  return cJSON_IsObject(a) && a->child && a->child->string && strcmp(a->child->string, "t") == 0 &&
         cJSON_IsNumber(a->child);
}

static bool is_float_tag(const cJSON *a) {
  return cJSON_IsObject(a) && a->child && a->child->string && strcmp(a->child->string, "float") == 0;
}

bool export_number_of(const cJSON *a, double *d, bool *is_float) {
  if (cJSON_IsNumber(a)) {
    *d = a->valuedouble;
    *is_float = a->valuedouble != floor(a->valuedouble) || fabs(a->valuedouble) >= 9007199254740992.0;
    return true;
  }
  if (!is_float_tag(a)) return false;
  const cJSON *v = a->child;
  *is_float = true;
  if (cJSON_IsNumber(v)) *d = v->valuedouble;
  else if (cJSON_IsString(v) && strcmp(v->valuestring, "inf") == 0) *d = INFINITY;
  else if (cJSON_IsString(v) && strcmp(v->valuestring, "-inf") == 0) *d = -INFINITY;
  else if (cJSON_IsString(v) && strcmp(v->valuestring, "nan") == 0) *d = NAN;
  else return false;
  return true;
}

static int put_double(mk_buf *out, double d) {
  if (isnan(d)) return mk_buf_puts(out, "std::numeric_limits<double>::quiet_NaN()");
  if (isinf(d)) return mk_buf_puts(out, d > 0 ? "std::numeric_limits<double>::infinity()"
                                              : "-std::numeric_limits<double>::infinity()");
  char tmp[64];
  snprintf(tmp, sizeof tmp, "%.17g", d);
  mk_buf_puts(out, tmp);
  if (strpbrk(tmp, ".eE") == NULL) mk_buf_puts(out, ".0");
  return out->err;
}

static int put_int(mk_buf *out, double d) { return mk_buf_printf(out, "int64_t(%.0f)", d); }

static int put_scalar(const cJSON *a, mk_buf *out) {
  double d;
  bool f;
  if (cJSON_IsBool(a)) return mk_buf_puts(out, cJSON_IsTrue(a) ? "at::Scalar(true)" : "at::Scalar(false)");
  if (!export_number_of(a, &d, &f)) return MK_EUNSUPPORTED;
  mk_buf_puts(out, "at::Scalar(");
  if (f) put_double(out, d);
  else put_int(out, d);
  return mk_buf_putc(out, ')');
}

/* Items of a recorded tuple / list / torch.Size, or NULL. */
static const cJSON *seq_items(const cJSON *a) {
  if (cJSON_IsArray(a)) return a;
  if (!cJSON_IsObject(a) || a->child == NULL || a->child->string == NULL) return NULL;
  const char *k = a->child->string;
  if (strcmp(k, "tuple") == 0 || strcmp(k, "list") == 0 || strcmp(k, "size") == 0) return a->child;
  return NULL;
}

/* An int list; `repeat` > 0 repeats a single int that many times. */
static int put_int_list(const cJSON *a, int repeat, mk_buf *out) {
  double d;
  bool f;
  if (export_number_of(a, &d, &f) && !f) {
    mk_buf_puts(out, "std::vector<int64_t>{");
    for (int i = 0; i < (repeat > 0 ? repeat : 1); i++) {
      if (i) mk_buf_puts(out, ", ");
      put_int(out, d);
    }
    return mk_buf_putc(out, '}');
  }
  const cJSON *items = seq_items(a);
  if (items == NULL) return MK_EUNSUPPORTED;
  mk_buf_puts(out, "std::vector<int64_t>{");
  int i = 0;
  for (const cJSON *it = items->child; it; it = it->next, i++) {
    if (!export_number_of(it, &d, &f) || f) return MK_EUNSUPPORTED;
    if (i) mk_buf_puts(out, ", ");
    put_int(out, d);
  }
  return mk_buf_putc(out, '}');
}

static const char *const dtypes[][2] = {
    {"float32", "at::kFloat"}, {"float64", "at::kDouble"}, {"float16", "at::kHalf"},
    {"bfloat16", "at::kBFloat16"}, {"int64", "at::kLong"}, {"int32", "at::kInt"},
    {"int16", "at::kShort"}, {"int8", "at::kChar"}, {"uint8", "at::kByte"}, {"bool", "at::kBool"},
};

static const char *tag_string(const cJSON *a, const char *tag) {
  if (!cJSON_IsObject(a) || a->child == NULL || a->child->string == NULL) return NULL;
  if (strcmp(a->child->string, tag) != 0 || !cJSON_IsString(a->child)) return NULL;
  return a->child->valuestring;
}

static int put_dtype(const cJSON *a, mk_buf *out) {
  const char *name = tag_string(a, "dtype");
  for (size_t i = 0; name && i < sizeof dtypes / sizeof dtypes[0]; i++)
    if (strcmp(dtypes[i][0], name) == 0) return mk_buf_puts(out, dtypes[i][1]);
  return MK_EUNSUPPORTED;
}

static int put_memory_format(const cJSON *a, mk_buf *out) {
  const char *name = tag_string(a, "memory_format");
  if (name == NULL) return MK_EUNSUPPORTED;
  if (strcmp(name, "contiguous_format") == 0) return mk_buf_puts(out, "at::MemoryFormat::Contiguous");
  if (strcmp(name, "channels_last") == 0) return mk_buf_puts(out, "at::MemoryFormat::ChannelsLast");
  if (strcmp(name, "channels_last_3d") == 0) return mk_buf_puts(out, "at::MemoryFormat::ChannelsLast3d");
  if (strcmp(name, "preserve_format") == 0) return mk_buf_puts(out, "at::MemoryFormat::Preserve");
  return MK_EUNSUPPORTED;
}

/* A short string argument ("none", "tanh", "floor"): pasted as a C++ literal,
 * so only plain characters. */
static int put_string(const cJSON *a, mk_buf *out) {
  if (!cJSON_IsString(a) || strlen(a->valuestring) > 64) return MK_EUNSUPPORTED;
  for (const char *c = a->valuestring; *c; c++)
    if (!(*c == '_' || *c == ' ' || (*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'z') ||
          (*c >= 'A' && *c <= 'Z')))
      return MK_EUNSUPPORTED;
  return mk_buf_printf(out, "\"%s\"", a->valuestring);
}

static int put_tensor_list(const cJSON *a, mk_buf *out) {
  const cJSON *items = seq_items(a);
  if (items == NULL) return MK_EUNSUPPORTED;
  mk_buf_puts(out, "std::vector<at::Tensor>{");
  int i = 0;
  for (const cJSON *it = items->child; it; it = it->next, i++) {
    if (!is_tensor(it)) return MK_EUNSUPPORTED;
    mk_buf_printf(out, "%sv%d", i ? ", " : "", it->child->valueint);
  }
  return mk_buf_putc(out, '}');
}

int export_put_arg(const char *kind, const cJSON *a, mk_buf *out) {
  bool optional = kind[strlen(kind) - 1] == '?';
  if (optional && (a == NULL || cJSON_IsNull(a))) {
    /* spelled with its type where ATen has a Tensor and a Scalar overload (clamp) */
    if (strcmp(kind, "T?") == 0) return mk_buf_puts(out, "::std::optional<at::Tensor>()");
    if (strcmp(kind, "S?") == 0) return mk_buf_puts(out, "::std::optional<at::Scalar>()");
    return mk_buf_puts(out, "::std::nullopt");
  }
  if (a == NULL) return MK_EUNSUPPORTED;
  double d;
  bool f;
  switch (kind[0]) {
  case 'T':
    if (kind[1] == 'L') return put_tensor_list(a, out);
    if (is_tensor(a)) return mk_buf_printf(out, "v%d", a->child->valueint);
    return kind[1] == 'S' ? put_scalar(a, out) : MK_EUNSUPPORTED;
  case 'S':
    if (kind[1] == 'T') return put_string(a, out);
    return put_scalar(a, out);
  case 'I':
    if (!export_number_of(a, &d, &f) || f) return MK_EUNSUPPORTED;
    return put_int(out, d);
  case 'F':
    if (!export_number_of(a, &d, &f)) return MK_EUNSUPPORTED;
    return put_double(out, d);
  case 'B':
    if (!cJSON_IsBool(a)) return MK_EUNSUPPORTED;
    return mk_buf_puts(out, cJSON_IsTrue(a) ? "true" : "false");
  case 'L':
    if (cJSON_IsNull(a)) return mk_buf_puts(out, "at::IntArrayRef{}"); /* stride=None: the kernel size */
    return put_int_list(a, kind[1] >= '1' && kind[1] <= '3' ? kind[1] - '0' : 0, out);
  case 'D':
    return put_dtype(a, out);
  case 'M':
    return put_memory_format(a, out);
  default:
    return MK_EUNSUPPORTED;
  }
}
