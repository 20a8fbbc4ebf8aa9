/* ops.c — the op table: which kind of computation each torch call is.
 *
 * One sorted table keyed by the op's last dotted component (see
 * mk_op_key), searched by bsearch. The category decides how the engine
 * decomposes a graph and what the builtin proposer may generate, so an
 * entry is added only when the op truly behaves like its category; ops the
 * engine cannot model (glu halves its input, item() leaves the graph) are
 * listed as MK_OP_OPAQUE on purpose. Names absent from the table are opaque
 * too: they still run, through PyTorch. The table must stay sorted by
 * strcmp order (tests/c/test_ir.c checks it). */
#include "mk_ir.h"

#include "mk_buf.h"

#include <stdlib.h>
#include <string.h>

typedef struct mk_op_entry {
  const char *name;
  mk_op_category category;
  unsigned flags;
} mk_op_entry;

static const mk_op_entry mk_op_table[] = {
    {"H", MK_OP_VIEW, 0},
    {"T", MK_OP_VIEW, 0},
    {"__abs__", MK_OP_ELEMENTWISE, 0},
    {"__add__", MK_OP_ELEMENTWISE, 0},
    {"__and__", MK_OP_ELEMENTWISE, 0},
    {"__bool__", MK_OP_OPAQUE, 0},
    {"__contains__", MK_OP_OPAQUE, 0},
    {"__div__", MK_OP_ELEMENTWISE, 0},
    {"__eq__", MK_OP_ELEMENTWISE, 0},
    {"__float__", MK_OP_OPAQUE, 0},
    {"__floordiv__", MK_OP_ELEMENTWISE, 0},
    {"__ge__", MK_OP_ELEMENTWISE, 0},
    {"__getitem__", MK_OP_DATA, 0},
    {"__gt__", MK_OP_ELEMENTWISE, 0},
    {"__iadd__", MK_OP_ELEMENTWISE, 0},
    {"__iand__", MK_OP_ELEMENTWISE, 0},
    {"__idiv__", MK_OP_ELEMENTWISE, 0},
    {"__ifloordiv__", MK_OP_ELEMENTWISE, 0},
    {"__ilshift__", MK_OP_ELEMENTWISE, 0},
    {"__imatmul__", MK_OP_MATMUL, 0},
    {"__imod__", MK_OP_ELEMENTWISE, 0},
    {"__imul__", MK_OP_ELEMENTWISE, 0},
    {"__index__", MK_OP_OPAQUE, 0},
    {"__int__", MK_OP_OPAQUE, 0},
    {"__invert__", MK_OP_ELEMENTWISE, 0},
    {"__ior__", MK_OP_ELEMENTWISE, 0},
    {"__ipow__", MK_OP_ELEMENTWISE, 0},
    {"__irshift__", MK_OP_ELEMENTWISE, 0},
    {"__isub__", MK_OP_ELEMENTWISE, 0},
    {"__iter__", MK_OP_OPAQUE, 0},
    {"__itruediv__", MK_OP_ELEMENTWISE, 0},
    {"__ixor__", MK_OP_ELEMENTWISE, 0},
    {"__le__", MK_OP_ELEMENTWISE, 0},
    {"__len__", MK_OP_VIEW, 0},
    {"__lshift__", MK_OP_ELEMENTWISE, 0},
    {"__lt__", MK_OP_ELEMENTWISE, 0},
    {"__matmul__", MK_OP_MATMUL, 0},
    {"__mod__", MK_OP_ELEMENTWISE, 0},
    {"__mul__", MK_OP_ELEMENTWISE, 0},
    {"__ne__", MK_OP_ELEMENTWISE, 0},
    {"__neg__", MK_OP_ELEMENTWISE, 0},
    {"__or__", MK_OP_ELEMENTWISE, 0},
    {"__pos__", MK_OP_ELEMENTWISE, 0},
    {"__pow__", MK_OP_ELEMENTWISE, 0},
    {"__radd__", MK_OP_ELEMENTWISE, 0},
    {"__rand__", MK_OP_ELEMENTWISE, 0},
    {"__rdiv__", MK_OP_ELEMENTWISE, 0},
    {"__rfloordiv__", MK_OP_ELEMENTWISE, 0},
    {"__rlshift__", MK_OP_ELEMENTWISE, 0},
    {"__rmatmul__", MK_OP_MATMUL, 0},
    {"__rmod__", MK_OP_ELEMENTWISE, 0},
    {"__rmul__", MK_OP_ELEMENTWISE, 0},
    {"__ror__", MK_OP_ELEMENTWISE, 0},
    {"__rpow__", MK_OP_ELEMENTWISE, 0},
    {"__rrshift__", MK_OP_ELEMENTWISE, 0},
    {"__rshift__", MK_OP_ELEMENTWISE, 0},
    {"__rsub__", MK_OP_ELEMENTWISE, 0},
    {"__rtruediv__", MK_OP_ELEMENTWISE, 0},
    {"__rxor__", MK_OP_ELEMENTWISE, 0},
    {"__setitem__", MK_OP_DATA, 0},
    {"__sub__", MK_OP_ELEMENTWISE, 0},
    {"__truediv__", MK_OP_ELEMENTWISE, 0},
    {"__xor__", MK_OP_ELEMENTWISE, 0},
    {"_convolution", MK_OP_CONV, 0},
    {"abs", MK_OP_ELEMENTWISE, 0},
    {"absolute", MK_OP_ELEMENTWISE, 0},
    {"acos", MK_OP_ELEMENTWISE, 0},
    {"acosh", MK_OP_ELEMENTWISE, 0},
    {"adaptive_avg_pool1d", MK_OP_POOL, 0},
    {"adaptive_avg_pool2d", MK_OP_POOL, 0},
    {"adaptive_avg_pool3d", MK_OP_POOL, 0},
    {"adaptive_max_pool1d", MK_OP_POOL, 0},
    {"adaptive_max_pool1d_with_indices", MK_OP_POOL, 0},
    {"adaptive_max_pool2d", MK_OP_POOL, 0},
    {"adaptive_max_pool2d_with_indices", MK_OP_POOL, 0},
    {"adaptive_max_pool3d", MK_OP_POOL, 0},
    {"adaptive_max_pool3d_with_indices", MK_OP_POOL, 0},
    {"add", MK_OP_ELEMENTWISE, 0},
    {"addbmm", MK_OP_MATMUL, 0},
    {"addcdiv", MK_OP_ELEMENTWISE, 0},
    {"addcmul", MK_OP_ELEMENTWISE, 0},
    {"addmm", MK_OP_MATMUL, 0},
    {"addmv", MK_OP_MATMUL, 0},
    {"addr", MK_OP_MATMUL, 0},
    {"adjoint", MK_OP_VIEW, 0},
    {"affine_grid", MK_OP_DATA, 0},
    {"alias", MK_OP_VIEW, 0},
    {"all", MK_OP_REDUCTION, 0},
    {"alpha_dropout", MK_OP_ELEMENTWISE, MK_OPF_RANDOM},
    {"amax", MK_OP_REDUCTION, 0},
    {"amin", MK_OP_REDUCTION, 0},
    {"aminmax", MK_OP_REDUCTION, 0},
    {"angle", MK_OP_ELEMENTWISE, 0},
    {"any", MK_OP_REDUCTION, 0},
    {"arange", MK_OP_FACTORY, 0},
    {"arccos", MK_OP_ELEMENTWISE, 0},
    {"arccosh", MK_OP_ELEMENTWISE, 0},
    {"arcsin", MK_OP_ELEMENTWISE, 0},
    {"arcsinh", MK_OP_ELEMENTWISE, 0},
    {"arctan", MK_OP_ELEMENTWISE, 0},
    {"arctan2", MK_OP_ELEMENTWISE, 0},
    {"arctanh", MK_OP_ELEMENTWISE, 0},
    {"argmax", MK_OP_REDUCTION, 0},
    {"argmin", MK_OP_REDUCTION, 0},
    {"argsort", MK_OP_DATA, 0},
    {"argwhere", MK_OP_DATA, 0},
    {"as_strided", MK_OP_VIEW, 0},
    {"as_tensor", MK_OP_FACTORY, 0},
    {"asin", MK_OP_ELEMENTWISE, 0},
    {"asinh", MK_OP_ELEMENTWISE, 0},
    {"atan", MK_OP_ELEMENTWISE, 0},
    {"atan2", MK_OP_ELEMENTWISE, 0},
    {"atanh", MK_OP_ELEMENTWISE, 0},
    {"atleast_1d", MK_OP_VIEW, 0},
    {"atleast_2d", MK_OP_VIEW, 0},
    {"atleast_3d", MK_OP_VIEW, 0},
    {"avg_pool1d", MK_OP_POOL, 0},
    {"avg_pool2d", MK_OP_POOL, 0},
    {"avg_pool3d", MK_OP_POOL, 0},
    {"baddbmm", MK_OP_MATMUL, 0},
    {"batch_norm", MK_OP_NORM, 0},
    {"bernoulli", MK_OP_ELEMENTWISE, MK_OPF_RANDOM},
    {"bfloat16", MK_OP_ELEMENTWISE, 0},
    {"bilinear", MK_OP_MATMUL, 0},
    {"binary_cross_entropy", MK_OP_REDUCTION, 0},
    {"binary_cross_entropy_with_logits", MK_OP_REDUCTION, 0},
    {"bincount", MK_OP_OPAQUE, 0},
    {"bitwise_and", MK_OP_ELEMENTWISE, 0},
    {"bitwise_left_shift", MK_OP_ELEMENTWISE, 0},
    {"bitwise_not", MK_OP_ELEMENTWISE, 0},
    {"bitwise_or", MK_OP_ELEMENTWISE, 0},
    {"bitwise_right_shift", MK_OP_ELEMENTWISE, 0},
    {"bitwise_xor", MK_OP_ELEMENTWISE, 0},
    {"block_diag", MK_OP_DATA, 0},
    {"bmm", MK_OP_MATMUL, 0},
    {"bool", MK_OP_ELEMENTWISE, 0},
    {"broadcast_to", MK_OP_VIEW, 0},
    {"byte", MK_OP_ELEMENTWISE, 0},
    {"cat", MK_OP_DATA, 0},
    {"cdist", MK_OP_MATMUL, 0},
    {"ceil", MK_OP_ELEMENTWISE, 0},
    {"celu", MK_OP_ELEMENTWISE, 0},
    {"chain_matmul", MK_OP_MATMUL, 0},
    {"channel_shuffle", MK_OP_DATA, 0},
    {"char", MK_OP_ELEMENTWISE, 0},
    {"chunk", MK_OP_DATA, 0},
    {"clamp", MK_OP_ELEMENTWISE, 0},
    {"clamp_max", MK_OP_ELEMENTWISE, 0},
    {"clamp_min", MK_OP_ELEMENTWISE, 0},
    {"clip", MK_OP_ELEMENTWISE, 0},
    {"clone", MK_OP_ELEMENTWISE, 0},
    {"column_stack", MK_OP_DATA, 0},
    {"concat", MK_OP_DATA, 0},
    {"concatenate", MK_OP_DATA, 0},
    {"conj", MK_OP_ELEMENTWISE, 0},
    {"contiguous", MK_OP_VIEW, 0},
    {"conv1d", MK_OP_CONV, 0},
    {"conv2d", MK_OP_CONV, 0},
    {"conv3d", MK_OP_CONV, 0},
    {"conv_tbc", MK_OP_CONV, 0},
    {"conv_transpose1d", MK_OP_CONV, 0},
    {"conv_transpose2d", MK_OP_CONV, 0},
    {"conv_transpose3d", MK_OP_CONV, 0},
    {"convolution", MK_OP_CONV, 0},
    {"copy", MK_OP_ELEMENTWISE, 0},
    {"copysign", MK_OP_ELEMENTWISE, 0},
    {"cos", MK_OP_ELEMENTWISE, 0},
    {"cosh", MK_OP_ELEMENTWISE, 0},
    {"cosine_embedding_loss", MK_OP_REDUCTION, 0},
    {"cosine_similarity", MK_OP_REDUCTION, 0},
    {"count_nonzero", MK_OP_REDUCTION, 0},
    {"cross_entropy", MK_OP_REDUCTION, 0},
    {"cummax", MK_OP_SCAN, 0},
    {"cummin", MK_OP_SCAN, 0},
    {"cumprod", MK_OP_SCAN, 0},
    {"cumsum", MK_OP_SCAN, 0},
    {"data", MK_OP_VIEW, 0},
    {"deg2rad", MK_OP_ELEMENTWISE, 0},
    {"detach", MK_OP_VIEW, 0},
    {"diag", MK_OP_DATA, 0},
    {"diag_embed", MK_OP_DATA, 0},
    {"diagonal", MK_OP_VIEW, 0},
    {"digamma", MK_OP_ELEMENTWISE, 0},
    {"dim", MK_OP_VIEW, 0},
    {"dist", MK_OP_REDUCTION, 0},
    {"div", MK_OP_ELEMENTWISE, 0},
    {"divide", MK_OP_ELEMENTWISE, 0},
    {"dot", MK_OP_MATMUL, 0},
    {"double", MK_OP_ELEMENTWISE, 0},
    {"dropout", MK_OP_ELEMENTWISE, MK_OPF_RANDOM},
    {"dropout1d", MK_OP_ELEMENTWISE, MK_OPF_RANDOM},
    {"dropout2d", MK_OP_ELEMENTWISE, MK_OPF_RANDOM},
    {"dropout3d", MK_OP_ELEMENTWISE, MK_OPF_RANDOM},
    {"dstack", MK_OP_DATA, 0},
    {"einsum", MK_OP_MATMUL, 0},
    {"element_size", MK_OP_VIEW, 0},
    {"elu", MK_OP_ELEMENTWISE, 0},
    {"embedding", MK_OP_DATA, 0},
    {"embedding_bag", MK_OP_DATA, 0},
    {"empty", MK_OP_FACTORY, 0},
    {"empty_like", MK_OP_FACTORY, 0},
    {"empty_strided", MK_OP_FACTORY, 0},
    {"entr", MK_OP_ELEMENTWISE, 0},
    {"eq", MK_OP_ELEMENTWISE, 0},
    {"erf", MK_OP_ELEMENTWISE, 0},
    {"erfc", MK_OP_ELEMENTWISE, 0},
    {"erfcx", MK_OP_ELEMENTWISE, 0},
    {"erfinv", MK_OP_ELEMENTWISE, 0},
    {"exp", MK_OP_ELEMENTWISE, 0},
    {"exp2", MK_OP_ELEMENTWISE, 0},
    {"expand", MK_OP_VIEW, 0},
    {"expand_as", MK_OP_VIEW, 0},
    {"expit", MK_OP_ELEMENTWISE, 0},
    {"expm1", MK_OP_ELEMENTWISE, 0},
    {"eye", MK_OP_FACTORY, 0},
    {"feature_alpha_dropout", MK_OP_ELEMENTWISE, MK_OPF_RANDOM},
    {"fill", MK_OP_ELEMENTWISE, 0},
    {"fix", MK_OP_ELEMENTWISE, 0},
    {"flatten", MK_OP_VIEW, 0},
    {"flip", MK_OP_DATA, 0},
    {"fliplr", MK_OP_DATA, 0},
    {"flipud", MK_OP_DATA, 0},
    {"float", MK_OP_ELEMENTWISE, 0},
    {"float_power", MK_OP_ELEMENTWISE, 0},
    {"floor", MK_OP_ELEMENTWISE, 0},
    {"floor_divide", MK_OP_ELEMENTWISE, 0},
    {"fmax", MK_OP_ELEMENTWISE, 0},
    {"fmin", MK_OP_ELEMENTWISE, 0},
    {"fmod", MK_OP_ELEMENTWISE, 0},
    {"fold", MK_OP_DATA, 0},
    {"frac", MK_OP_ELEMENTWISE, 0},
    {"fractional_max_pool2d", MK_OP_POOL, MK_OPF_RANDOM},
    {"fractional_max_pool3d", MK_OP_POOL, MK_OPF_RANDOM},
    {"frobenius_norm", MK_OP_REDUCTION, 0},
    {"full", MK_OP_FACTORY, 0},
    {"full_like", MK_OP_FACTORY, 0},
    {"gather", MK_OP_DATA, 0},
    {"gaussian_nll_loss", MK_OP_REDUCTION, 0},
    {"ge", MK_OP_ELEMENTWISE, 0},
    {"gelu", MK_OP_ELEMENTWISE, 0},
    {"ger", MK_OP_MATMUL, 0},
    {"get_device", MK_OP_VIEW, 0},
    {"glu", MK_OP_OPAQUE, 0},
    {"greater", MK_OP_ELEMENTWISE, 0},
    {"greater_equal", MK_OP_ELEMENTWISE, 0},
    {"grid_sample", MK_OP_DATA, 0},
    {"group_norm", MK_OP_NORM, 0},
    {"gru", MK_OP_RNN, 0},
    {"gru_cell", MK_OP_RNN, 0},
    {"gt", MK_OP_ELEMENTWISE, 0},
    {"gumbel_softmax", MK_OP_SOFTMAX, MK_OPF_RANDOM},
    {"half", MK_OP_ELEMENTWISE, 0},
    {"hardshrink", MK_OP_ELEMENTWISE, 0},
    {"hardsigmoid", MK_OP_ELEMENTWISE, 0},
    {"hardswish", MK_OP_ELEMENTWISE, 0},
    {"hardtanh", MK_OP_ELEMENTWISE, 0},
    {"heaviside", MK_OP_ELEMENTWISE, 0},
    {"hinge_embedding_loss", MK_OP_REDUCTION, 0},
    {"histc", MK_OP_OPAQUE, 0},
    {"hstack", MK_OP_DATA, 0},
    {"huber_loss", MK_OP_REDUCTION, 0},
    {"hypot", MK_OP_ELEMENTWISE, 0},
    {"i0", MK_OP_ELEMENTWISE, 0},
    {"i0e", MK_OP_ELEMENTWISE, 0},
    {"i1", MK_OP_ELEMENTWISE, 0},
    {"i1e", MK_OP_ELEMENTWISE, 0},
    {"imag", MK_OP_VIEW, 0},
    {"index_add", MK_OP_DATA, 0},
    {"index_copy", MK_OP_DATA, 0},
    {"index_fill", MK_OP_DATA, 0},
    {"index_put", MK_OP_DATA, 0},
    {"index_select", MK_OP_DATA, 0},
    {"inner", MK_OP_MATMUL, 0},
    {"instance_norm", MK_OP_NORM, 0},
    {"int", MK_OP_ELEMENTWISE, 0},
    {"interpolate", MK_OP_DATA, 0},
    {"is_complex", MK_OP_VIEW, 0},
    {"is_contiguous", MK_OP_VIEW, 0},
    {"is_floating_point", MK_OP_VIEW, 0},
    {"isclose", MK_OP_ELEMENTWISE, 0},
    {"isfinite", MK_OP_ELEMENTWISE, 0},
    {"isinf", MK_OP_ELEMENTWISE, 0},
    {"isnan", MK_OP_ELEMENTWISE, 0},
    {"isneginf", MK_OP_ELEMENTWISE, 0},
    {"isposinf", MK_OP_ELEMENTWISE, 0},
    {"item", MK_OP_OPAQUE, 0},
    {"kl_div", MK_OP_REDUCTION, 0},
    {"kron", MK_OP_MATMUL, 0},
    {"kthvalue", MK_OP_REDUCTION, 0},
    {"l1_loss", MK_OP_REDUCTION, 0},
    {"layer_norm", MK_OP_NORM, 0},
    {"le", MK_OP_ELEMENTWISE, 0},
    {"leaky_relu", MK_OP_ELEMENTWISE, 0},
    {"lerp", MK_OP_ELEMENTWISE, 0},
    {"less", MK_OP_ELEMENTWISE, 0},
    {"less_equal", MK_OP_ELEMENTWISE, 0},
    {"lgamma", MK_OP_ELEMENTWISE, 0},
    {"linear", MK_OP_MATMUL, 0},
    {"linspace", MK_OP_FACTORY, 0},
    {"local_response_norm", MK_OP_NORM, 0},
    {"log", MK_OP_ELEMENTWISE, 0},
    {"log10", MK_OP_ELEMENTWISE, 0},
    {"log1p", MK_OP_ELEMENTWISE, 0},
    {"log2", MK_OP_ELEMENTWISE, 0},
    {"log_ndtr", MK_OP_ELEMENTWISE, 0},
    {"log_softmax", MK_OP_SOFTMAX, 0},
    {"logaddexp", MK_OP_ELEMENTWISE, 0},
    {"logaddexp2", MK_OP_ELEMENTWISE, 0},
    {"logcumsumexp", MK_OP_SCAN, 0},
    {"logical_and", MK_OP_ELEMENTWISE, 0},
    {"logical_not", MK_OP_ELEMENTWISE, 0},
    {"logical_or", MK_OP_ELEMENTWISE, 0},
    {"logical_xor", MK_OP_ELEMENTWISE, 0},
    {"logit", MK_OP_ELEMENTWISE, 0},
    {"logsigmoid", MK_OP_ELEMENTWISE, 0},
    {"logspace", MK_OP_FACTORY, 0},
    {"logsumexp", MK_OP_REDUCTION, 0},
    {"long", MK_OP_ELEMENTWISE, 0},
    {"lp_pool1d", MK_OP_POOL, 0},
    {"lp_pool2d", MK_OP_POOL, 0},
    {"lp_pool3d", MK_OP_POOL, 0},
    {"lstm", MK_OP_RNN, 0},
    {"lstm_cell", MK_OP_RNN, 0},
    {"lt", MK_OP_ELEMENTWISE, 0},
    {"mH", MK_OP_VIEW, 0},
    {"mT", MK_OP_VIEW, 0},
    {"margin_ranking_loss", MK_OP_REDUCTION, 0},
    {"masked_fill", MK_OP_ELEMENTWISE, 0},
    {"masked_scatter", MK_OP_DATA, 0},
    {"masked_select", MK_OP_DATA, 0},
    {"matmul", MK_OP_MATMUL, 0},
    {"matrix_norm", MK_OP_REDUCTION, 0},
    {"max", MK_OP_REDUCTION, 0},
    {"max_pool1d", MK_OP_POOL, 0},
    {"max_pool1d_with_indices", MK_OP_POOL, 0},
    {"max_pool2d", MK_OP_POOL, 0},
    {"max_pool2d_with_indices", MK_OP_POOL, 0},
    {"max_pool3d", MK_OP_POOL, 0},
    {"max_pool3d_with_indices", MK_OP_POOL, 0},
    {"maximum", MK_OP_ELEMENTWISE, 0},
    {"mean", MK_OP_REDUCTION, 0},
    {"median", MK_OP_REDUCTION, 0},
    {"min", MK_OP_REDUCTION, 0},
    {"minimum", MK_OP_ELEMENTWISE, 0},
    {"mish", MK_OP_ELEMENTWISE, 0},
    {"mm", MK_OP_MATMUL, 0},
    {"mode", MK_OP_REDUCTION, 0},
    {"moveaxis", MK_OP_VIEW, 0},
    {"movedim", MK_OP_VIEW, 0},
    {"mse_loss", MK_OP_REDUCTION, 0},
    {"msort", MK_OP_DATA, 0},
    {"mul", MK_OP_ELEMENTWISE, 0},
    {"multi_dot", MK_OP_MATMUL, 0},
    {"multi_head_attention_forward", MK_OP_ATTENTION, 0},
    {"multi_margin_loss", MK_OP_REDUCTION, 0},
    {"multilabel_margin_loss", MK_OP_REDUCTION, 0},
    {"multilabel_soft_margin_loss", MK_OP_REDUCTION, 0},
    {"multinomial", MK_OP_FACTORY, MK_OPF_RANDOM},
    {"multiply", MK_OP_ELEMENTWISE, 0},
    {"mv", MK_OP_MATMUL, 0},
    {"mvlgamma", MK_OP_ELEMENTWISE, 0},
    {"nan_to_num", MK_OP_ELEMENTWISE, 0},
    {"nanmean", MK_OP_REDUCTION, 0},
    {"nanmedian", MK_OP_REDUCTION, 0},
    {"nansum", MK_OP_REDUCTION, 0},
    {"narrow", MK_OP_VIEW, 0},
    {"native_batch_norm", MK_OP_NORM, 0},
    {"native_channel_shuffle", MK_OP_DATA, 0},
    {"native_layer_norm", MK_OP_NORM, 0},
    {"ndim", MK_OP_VIEW, 0},
    {"ndimension", MK_OP_VIEW, 0},
    {"ndtr", MK_OP_ELEMENTWISE, 0},
    {"ndtri", MK_OP_ELEMENTWISE, 0},
    {"ne", MK_OP_ELEMENTWISE, 0},
    {"neg", MK_OP_ELEMENTWISE, 0},
    {"negative", MK_OP_ELEMENTWISE, 0},
    {"new_empty", MK_OP_FACTORY, 0},
    {"new_full", MK_OP_FACTORY, 0},
    {"new_ones", MK_OP_FACTORY, 0},
    {"new_tensor", MK_OP_FACTORY, 0},
    {"new_zeros", MK_OP_FACTORY, 0},
    {"nll_loss", MK_OP_REDUCTION, 0},
    {"nonzero", MK_OP_DATA, 0},
    {"norm", MK_OP_REDUCTION, 0},
    {"normal", MK_OP_FACTORY, MK_OPF_RANDOM},
    {"normalize", MK_OP_NORM, 0},
    {"not_equal", MK_OP_ELEMENTWISE, 0},
    {"nuclear_norm", MK_OP_REDUCTION, 0},
    {"numel", MK_OP_VIEW, 0},
    {"one_hot", MK_OP_DATA, 0},
    {"ones", MK_OP_FACTORY, 0},
    {"ones_like", MK_OP_FACTORY, 0},
    {"outer", MK_OP_MATMUL, 0},
    {"pad", MK_OP_DATA, 0},
    {"pairwise_distance", MK_OP_REDUCTION, 0},
    {"permute", MK_OP_VIEW, 0},
    {"pixel_shuffle", MK_OP_DATA, 0},
    {"pixel_unshuffle", MK_OP_DATA, 0},
    {"poisson", MK_OP_FACTORY, MK_OPF_RANDOM},
    {"poisson_nll_loss", MK_OP_REDUCTION, 0},
    {"polygamma", MK_OP_ELEMENTWISE, 0},
    {"positive", MK_OP_ELEMENTWISE, 0},
    {"pow", MK_OP_ELEMENTWISE, 0},
    {"prelu", MK_OP_ELEMENTWISE, 0},
    {"prod", MK_OP_REDUCTION, 0},
    {"rad2deg", MK_OP_ELEMENTWISE, 0},
    {"rand", MK_OP_FACTORY, MK_OPF_RANDOM},
    {"rand_like", MK_OP_FACTORY, MK_OPF_RANDOM},
    {"randint", MK_OP_FACTORY, MK_OPF_RANDOM},
    {"randint_like", MK_OP_FACTORY, MK_OPF_RANDOM},
    {"randn", MK_OP_FACTORY, MK_OPF_RANDOM},
    {"randn_like", MK_OP_FACTORY, MK_OPF_RANDOM},
    {"randperm", MK_OP_FACTORY, MK_OPF_RANDOM},
    {"range", MK_OP_FACTORY, 0},
    {"ravel", MK_OP_VIEW, 0},
    {"real", MK_OP_VIEW, 0},
    {"reciprocal", MK_OP_ELEMENTWISE, 0},
    {"relu", MK_OP_ELEMENTWISE, 0},
    {"relu6", MK_OP_ELEMENTWISE, 0},
    {"remainder", MK_OP_ELEMENTWISE, 0},
    {"repeat", MK_OP_DATA, 0},
    {"repeat_interleave", MK_OP_DATA, 0},
    {"requires_grad", MK_OP_VIEW, 0},
    {"reshape", MK_OP_VIEW, 0},
    {"reshape_as", MK_OP_VIEW, 0},
    {"rms_norm", MK_OP_NORM, 0},
    {"rnn_relu", MK_OP_RNN, 0},
    {"rnn_relu_cell", MK_OP_RNN, 0},
    {"rnn_tanh", MK_OP_RNN, 0},
    {"rnn_tanh_cell", MK_OP_RNN, 0},
    {"roll", MK_OP_DATA, 0},
    {"rot90", MK_OP_DATA, 0},
    {"round", MK_OP_ELEMENTWISE, 0},
    {"rrelu", MK_OP_ELEMENTWISE, MK_OPF_RANDOM},
    {"rsqrt", MK_OP_ELEMENTWISE, 0},
    {"rsub", MK_OP_ELEMENTWISE, 0},
    {"scalar_tensor", MK_OP_FACTORY, 0},
    {"scaled_dot_product_attention", MK_OP_ATTENTION, 0},
    {"scatter", MK_OP_DATA, 0},
    {"scatter_add", MK_OP_DATA, 0},
    {"scatter_reduce", MK_OP_DATA, 0},
    {"select", MK_OP_VIEW, 0},
    {"selu", MK_OP_ELEMENTWISE, 0},
    {"sgn", MK_OP_ELEMENTWISE, 0},
    {"shape", MK_OP_VIEW, 0},
    {"short", MK_OP_ELEMENTWISE, 0},
    {"sigmoid", MK_OP_ELEMENTWISE, 0},
    {"sign", MK_OP_ELEMENTWISE, 0},
    {"signbit", MK_OP_ELEMENTWISE, 0},
    {"silu", MK_OP_ELEMENTWISE, 0},
    {"sin", MK_OP_ELEMENTWISE, 0},
    {"sinc", MK_OP_ELEMENTWISE, 0},
    {"sinh", MK_OP_ELEMENTWISE, 0},
    {"size", MK_OP_VIEW, 0},
    {"smooth_l1_loss", MK_OP_REDUCTION, 0},
    {"soft_margin_loss", MK_OP_REDUCTION, 0},
    {"softmax", MK_OP_SOFTMAX, 0},
    {"softmin", MK_OP_SOFTMAX, 0},
    {"softplus", MK_OP_ELEMENTWISE, 0},
    {"softshrink", MK_OP_ELEMENTWISE, 0},
    {"softsign", MK_OP_ELEMENTWISE, 0},
    {"sort", MK_OP_DATA, 0},
    {"split", MK_OP_DATA, 0},
    {"split_with_sizes", MK_OP_DATA, 0},
    {"sqrt", MK_OP_ELEMENTWISE, 0},
    {"square", MK_OP_ELEMENTWISE, 0},
    {"squeeze", MK_OP_VIEW, 0},
    {"stack", MK_OP_DATA, 0},
    {"std", MK_OP_REDUCTION, 0},
    {"std_mean", MK_OP_REDUCTION, 0},
    {"storage_offset", MK_OP_VIEW, 0},
    {"stride", MK_OP_VIEW, 0},
    {"sub", MK_OP_ELEMENTWISE, 0},
    {"subtract", MK_OP_ELEMENTWISE, 0},
    {"sum", MK_OP_REDUCTION, 0},
    {"swapaxes", MK_OP_VIEW, 0},
    {"swapdims", MK_OP_VIEW, 0},
    {"t", MK_OP_VIEW, 0},
    {"take", MK_OP_DATA, 0},
    {"take_along_dim", MK_OP_DATA, 0},
    {"tan", MK_OP_ELEMENTWISE, 0},
    {"tanh", MK_OP_ELEMENTWISE, 0},
    {"tanhshrink", MK_OP_ELEMENTWISE, 0},
    {"tensor", MK_OP_FACTORY, 0},
    {"tensor_split", MK_OP_DATA, 0},
    {"tensordot", MK_OP_MATMUL, 0},
    {"threshold", MK_OP_ELEMENTWISE, 0},
    {"tile", MK_OP_DATA, 0},
    {"to", MK_OP_ELEMENTWISE, 0},
    {"tolist", MK_OP_OPAQUE, 0},
    {"topk", MK_OP_DATA, 0},
    {"trace", MK_OP_REDUCTION, 0},
    {"transpose", MK_OP_VIEW, 0},
    {"tril", MK_OP_ELEMENTWISE, 0},
    {"triplet_margin_loss", MK_OP_REDUCTION, 0},
    {"triplet_margin_with_distance_loss", MK_OP_REDUCTION, 0},
    {"triu", MK_OP_ELEMENTWISE, 0},
    {"true_divide", MK_OP_ELEMENTWISE, 0},
    {"trunc", MK_OP_ELEMENTWISE, 0},
    {"type", MK_OP_ELEMENTWISE, 0},
    {"type_as", MK_OP_ELEMENTWISE, 0},
    {"unbind", MK_OP_DATA, 0},
    {"unflatten", MK_OP_VIEW, 0},
    {"unfold", MK_OP_DATA, 0},
    {"uniform", MK_OP_FACTORY, MK_OPF_RANDOM},
    {"unique", MK_OP_OPAQUE, 0},
    {"unique_consecutive", MK_OP_OPAQUE, 0},
    {"unsqueeze", MK_OP_VIEW, 0},
    {"upsample", MK_OP_DATA, 0},
    {"upsample_bilinear", MK_OP_DATA, 0},
    {"upsample_nearest", MK_OP_DATA, 0},
    {"var", MK_OP_REDUCTION, 0},
    {"var_mean", MK_OP_REDUCTION, 0},
    {"vdot", MK_OP_MATMUL, 0},
    {"vector_norm", MK_OP_REDUCTION, 0},
    {"view", MK_OP_VIEW, 0},
    {"view_as", MK_OP_VIEW, 0},
    {"view_as_complex", MK_OP_VIEW, 0},
    {"view_as_real", MK_OP_VIEW, 0},
    {"vstack", MK_OP_DATA, 0},
    {"where", MK_OP_ELEMENTWISE, 0},
    {"xlog1py", MK_OP_ELEMENTWISE, 0},
    {"xlogy", MK_OP_ELEMENTWISE, 0},
    {"zero", MK_OP_ELEMENTWISE, 0},
    {"zeros", MK_OP_FACTORY, 0},
    {"zeros_like", MK_OP_FACTORY, 0},
};

#define MK_OP_TABLE_LEN ((int)(sizeof mk_op_table / sizeof mk_op_table[0]))

static const char *const mk_op_category_names[MK_OP_NCATEGORIES] = {
    [MK_OP_OPAQUE] = "opaque",       [MK_OP_ELEMENTWISE] = "elementwise",
    [MK_OP_REDUCTION] = "reduction", [MK_OP_SOFTMAX] = "softmax",
    [MK_OP_NORM] = "norm",           [MK_OP_POOL] = "pool",
    [MK_OP_MATMUL] = "matmul",       [MK_OP_CONV] = "conv",
    [MK_OP_VIEW] = "view",           [MK_OP_FACTORY] = "factory",
    [MK_OP_RNN] = "rnn",             [MK_OP_ATTENTION] = "attention",
    [MK_OP_DATA] = "data",           [MK_OP_SCAN] = "scan",
};

const char *mk_op_category_name(mk_op_category c) {
  if ((int)c < 0 || (int)c >= MK_OP_NCATEGORIES) return "invalid";
  return mk_op_category_names[c];
}

static bool is_dunder(const char *s, size_t n) {
  return n > 4 && s[0] == '_' && s[1] == '_' && s[n - 1] == '_' && s[n - 2] == '_';
}

/* Finds the component that names the op: the last one, or for a property
 * getter ("torch.Tensor.T.__get__") the one before it. */
static const char *op_component(const char *op, size_t *len) {
  const char *last = strrchr(op, '.');
  const char *start = last ? last + 1 : op;
  if (last && last > op && strcmp(start, "__get__") == 0) {
    const char *prev = last;
    while (prev > op && prev[-1] != '.') prev--;
    *len = (size_t)(last - prev);
    return prev;
  }
  *len = strlen(start);
  return start;
}

/* The table key: the naming component, dunders verbatim (so "__rand__"
 * never meets torch.rand), one trailing "_" of an in-place form dropped.
 * Returns false when the key does not fit or is empty. */
static bool op_key(const char *op, char *buf, size_t bufsize) {
  size_t n;
  const char *c = op_component(op, &n);
  if (!is_dunder(c, n) && n > 1 && c[n - 1] == '_') n--;
  if (n == 0 || n >= bufsize) return false;
  memcpy(buf, c, n);
  buf[n] = '\0';
  return true;
}

/* Calls from outside torch (none should be recorded) stay opaque. */
static bool in_torch(const char *op) {
  return strchr(op, '.') == NULL || strncmp(op, "torch.", 6) == 0;
}

static int entry_cmp(const void *key, const void *elem) {
  return strcmp((const char *)key, ((const mk_op_entry *)elem)->name);
}

static const mk_op_entry *op_lookup(const char *op) {
  char key[128];
  if (op == NULL || !in_torch(op) || !op_key(op, key, sizeof key)) return NULL;
  return bsearch(key, mk_op_table, (size_t)MK_OP_TABLE_LEN, sizeof mk_op_table[0], entry_cmp);
}

mk_op_category mk_op_category_of(const char *op) {
  const mk_op_entry *e = op_lookup(op);
  return e ? e->category : MK_OP_OPAQUE;
}

unsigned mk_op_flags(const char *op) {
  const mk_op_entry *e = op_lookup(op);
  return e ? e->flags : 0u;
}

/* Augmented-assignment dunders; "__index__" or "__invert__" also start
 * with an i, hence the list. */
static const char *const mk_inplace_dunders[] = {
    "__iadd__", "__iand__", "__idiv__", "__ifloordiv__", "__ilshift__", "__imatmul__", "__imod__",
    "__imul__", "__ior__",  "__ipow__", "__irshift__",   "__isub__",    "__itruediv__", "__ixor__",
};

bool mk_op_is_inplace(const char *op) {
  if (op == NULL) return false;
  size_t n;
  const char *c = op_component(op, &n);
  if (is_dunder(c, n)) {
    for (size_t i = 0; i < sizeof mk_inplace_dunders / sizeof mk_inplace_dunders[0]; i++)
      if (strlen(mk_inplace_dunders[i]) == n && memcmp(mk_inplace_dunders[i], c, n) == 0) return true;
    return false;
  }
  return n > 1 && c[n - 1] == '_' && c[0] != '_';
}

bool mk_op_is_heavy(mk_op_category c) {
  return c == MK_OP_CONV || c == MK_OP_MATMUL || c == MK_OP_NORM || c == MK_OP_POOL ||
         c == MK_OP_ATTENTION || c == MK_OP_RNN;
}

int mk_op_table_size(void) { return MK_OP_TABLE_LEN; }

const char *mk_op_table_name(int i, mk_op_category *category) {
  if (i < 0 || i >= MK_OP_TABLE_LEN) return NULL;
  if (category) *category = mk_op_table[i].category;
  return mk_op_table[i].name;
}

const char *mk_op_short_name(const char *op, char *buf, size_t bufsize) {
  if (bufsize == 0) return buf;
  buf[0] = '\0';
  if (op == NULL) return buf;
  size_t n;
  const char *c = op_component(op, &n);
  if (is_dunder(c, n)) {
    c += 2;
    n -= 4;
  } else if (n > 1 && c[n - 1] == '_') {
    n--;
  }
  if (n >= bufsize) n = bufsize - 1;
  memcpy(buf, c, n);
  buf[n] = '\0';
  return buf;
}

/* ---- refinement by arguments ------------------------------------------- */

static bool arg_is_tensor(const cJSON *a) { return cJSON_IsObject(a) && cJSON_GetObjectItemCaseSensitive(a, "t"); }

/* torch.max(a, b) / a.max(b) / a.max(other=b) compare elementwise. */
static bool is_binary_minmax(const cJSON *args, const cJSON *kwargs) {
  if (cJSON_IsArray(args) && arg_is_tensor(cJSON_GetArrayItem(args, 1))) return true;
  return cJSON_IsObject(kwargs) && arg_is_tensor(cJSON_GetObjectItemCaseSensitive(kwargs, "other"));
}

/* An index made only of ints, slices, None, Ellipsis and bools (possibly in
 * a tuple) selects a strided view; tensors and lists index by gathering. */
static bool is_basic_index(const cJSON *idx) {
  if (idx == NULL || cJSON_IsNull(idx) || cJSON_IsBool(idx) || cJSON_IsNumber(idx)) return true;
  if (!cJSON_IsObject(idx)) return false;
  if (cJSON_GetObjectItemCaseSensitive(idx, "slice") || cJSON_GetObjectItemCaseSensitive(idx, "ellipsis"))
    return true;
  const cJSON *tup = cJSON_GetObjectItemCaseSensitive(idx, "tuple");
  if (!cJSON_IsArray(tup)) return false;
  const cJSON *it;
  cJSON_ArrayForEach(it, tup) {
    if (cJSON_IsObject(it) && cJSON_GetObjectItemCaseSensitive(it, "tuple")) return false;
    if (!is_basic_index(it)) return false;
  }
  return true;
}

static int count_args(const cJSON *args) { return cJSON_IsArray(args) ? cJSON_GetArraySize(args) : 0; }

mk_op_category mk_op_category_for_call(const char *op, const cJSON *args, const cJSON *kwargs) {
  mk_op_category c = mk_op_category_of(op);
  if (c == MK_OP_OPAQUE) return c;
  char key[128];
  if (!op_key(op, key, sizeof key)) return c;
  if (strcmp(key, "max") == 0 || strcmp(key, "min") == 0)
    return is_binary_minmax(args, kwargs) ? MK_OP_ELEMENTWISE : MK_OP_REDUCTION;
  if (strcmp(key, "__getitem__") == 0)
    return is_basic_index(cJSON_GetArrayItem(args, 1)) ? MK_OP_VIEW : MK_OP_DATA;
  if (strcmp(key, "where") == 0 && count_args(args) == 1 &&
      !(cJSON_IsObject(kwargs) && cJSON_GetArraySize(kwargs) > 0))
    return MK_OP_OPAQUE;
  return c;
}
