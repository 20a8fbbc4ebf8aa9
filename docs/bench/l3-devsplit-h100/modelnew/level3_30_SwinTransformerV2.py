# Replayed as one CUDA graph per input signature (MKEvolve): the composed
# forward below, captured once, every call a fresh output.
# ModelNew composed by MKEvolve 0.1.0 from kernelbench/level3/30_SwinTransformerV2.py (class Model).
# It runs Triton kernels: on a machine without a GPU, set TRITON_INTERPRET=1
# (Triton's CPU interpreter) in the environment before Python starts.
# Subkernels (each verified against PyTorch before it was chosen):
#   sk0 conv2d                       lines 433-433  reference (PyTorch)
#   sk1 layer_norm_dropout           lines 52-517  triton_rows_b1024_w4 (builtin)
#   sk2 zeros_like_cat               lines 156-156  reference (PyTorch)
#   sk3 linear                       lines 157-159  reference (PyTorch)
#   sk4 normalize                    lines 162-162  reference (PyTorch)
#   sk5 normalize_2                  lines 162-162  reference (PyTorch)
#   sk6 matmul                       lines 162-162  triton_gemm64x64x32_w4_s3_tf32x3 (builtin)
#   sk7 to                           lines 163-163  reference (PyTorch)
#   sk8 tensor_log_clamp_exp         lines 163-164  reference (PyTorch)
#   sk9 linear_relu                  lines 166-166  reference (PyTorch)
#   sk10 linear_2                     lines 166-166  reference (PyTorch)
#   sk11 index_sigmoid_mul_add        lines 167-179  reference (PyTorch)
#   sk12 dropout                      lines 181-181  reference (PyTorch)
#   sk13 matmul_2                     lines 183-183  reference (PyTorch)
#   sk14 linear_dropout               lines 69-289  triton_gemm128x128x32_w8_s3_tf32x3_b1024_w4 (builtin)
#   sk15 layer_norm_add               lines 290-290  triton_rows_b1024_w4 (builtin)
#   sk16 linear_gelu_dropout          lines 34-36  triton_gemm64x64x32_w4_s3_tf32x3_b1024_w4 (builtin)
#   sk17 linear_dropout_2             lines 37-38  reference (PyTorch)
#   sk18 layer_norm_add_roll          lines 52-293  triton_rows_b1024_w4 (builtin)
#   sk19 zeros_like_cat_2             lines 156-156  reference (PyTorch)
#   sk20 linear_3                     lines 157-159  reference (PyTorch)
#   sk21 normalize_3                  lines 162-162  reference (PyTorch)
#   sk22 normalize_4                  lines 162-162  reference (PyTorch)
#   sk23 matmul_3                     lines 162-162  triton_gemm64x64x32_w4_s3_tf32x3 (builtin)
#       (the kernel of sk6)
#   sk24 to_2                         lines 163-163  reference (PyTorch)
#   sk25 tensor_log_clamp_exp_2       lines 163-164  reference (PyTorch)
#   sk26 linear_relu_2                lines 166-166  reference (PyTorch)
#   sk27 linear_4                     lines 166-166  reference (PyTorch)
#   sk28 index_sigmoid_mul_add_2      lines 167-175  reference (PyTorch)
#   sk29 add_softmax                  lines 175-177  reference (PyTorch)
#   sk30 dropout_2                    lines 181-181  reference (PyTorch)
#   sk31 matmul_4                     lines 183-183  reference (PyTorch)
#   sk32 linear_dropout_roll          lines 69-289  triton_gemm128x128x32_w8_s3_tf32x3_b1024_w4 (builtin)
#   sk33 layer_norm_add_2             lines 290-290  triton_rows_b1024_w4 (builtin)
#       (the kernel of sk15)
#   sk34 linear_gelu_dropout_2        lines 34-36  triton_gemm64x64x32_w4_s3_tf32x3_b1024_w4 (builtin)
#       (the kernel of sk16)
#   sk35 linear_dropout_3             lines 37-38  reference (PyTorch)
#   sk36 layer_norm_add_cat           lines 293-330  triton_b1024_w4 (builtin)
#   sk37 linear_5                     lines 332-332  reference (PyTorch)
#   sk38 layer_norm                   lines 52-333  triton_b1024_w4 (builtin)
#   sk39 zeros_like_cat_3             lines 156-156  reference (PyTorch)
#   sk40 linear_6                     lines 157-159  triton_gemm64x64x32_w4_s3_tf32x3 (builtin)
#   sk41 normalize_5                  lines 162-162  reference (PyTorch)
#   sk42 normalize_6                  lines 162-162  reference (PyTorch)
#   sk43 matmul_5                     lines 162-162  triton_gemm64x64x32_w4_s3_tf32x3 (builtin)
#   sk44 to_3                         lines 163-163  reference (PyTorch)
#   sk45 tensor_log_clamp_exp_3       lines 163-164  reference (PyTorch)
#   sk46 linear_relu_3                lines 166-166  reference (PyTorch)
#   sk47 linear_7                     lines 166-166  reference (PyTorch)
#   sk48 index_sigmoid_mul_add_3      lines 167-179  reference (PyTorch)
#   sk49 dropout_3                    lines 181-181  reference (PyTorch)
#   sk50 matmul_6                     lines 183-183  reference (PyTorch)
#   sk51 linear_dropout_4             lines 69-289  triton_gemm128x128x32_w8_s3_tf32x3_b1024_w4 (builtin)
#   sk52 layer_norm_add_3             lines 290-290  reference (PyTorch)
#   sk53 linear_gelu_dropout_3        lines 34-36  triton_gemm128x128x32_w8_s3_tf32x3_b1024_w4 (builtin)
#   sk54 linear_dropout_5             lines 37-38  triton_gemm64x64x32_w4_s3_tf32x3_b1024_w4 (builtin)
#   sk55 layer_norm_add_roll_2        lines 52-293  triton_b1024_w4 (builtin)
#   sk56 zeros_like_cat_4             lines 156-156  reference (PyTorch)
#   sk57 linear_8                     lines 157-159  triton_gemm64x64x32_w4_s3_tf32x3 (builtin)
#       (the kernel of sk40)
#   sk58 normalize_7                  lines 162-162  reference (PyTorch)
#   sk59 normalize_8                  lines 162-162  reference (PyTorch)
#   sk60 matmul_7                     lines 162-162  triton_gemm64x64x32_w4_s3_tf32x3 (builtin)
#       (the kernel of sk43)
#   sk61 to_4                         lines 163-163  reference (PyTorch)
#   sk62 tensor_log_clamp_exp_4       lines 163-164  reference (PyTorch)
#   sk63 linear_relu_4                lines 166-166  reference (PyTorch)
#   sk64 linear_9                     lines 166-166  reference (PyTorch)
#   sk65 index_sigmoid_mul_add_4      lines 167-175  reference (PyTorch)
#   sk66 add_softmax_2                lines 175-177  reference (PyTorch)
#   sk67 dropout_4                    lines 181-181  reference (PyTorch)
#   sk68 matmul_8                     lines 183-183  reference (PyTorch)
#   sk69 linear_dropout_roll_2        lines 69-289  triton_gemm64x64x32_w4_s3_tf32x3_b1024_w4 (builtin)
#   sk70 layer_norm_add_4             lines 290-290  reference (PyTorch)
#   sk71 linear_gelu_dropout_4        lines 34-36  triton_gemm128x128x32_w8_s3_tf32x3_b1024_w4 (builtin)
#       (the kernel of sk53)
#   sk72 linear_dropout_6             lines 37-38  triton_gemm64x64x32_w4_s3_tf32x3_b1024_w4 (builtin)
#       (the kernel of sk54)
#   sk73 layer_norm_add_cat_2         lines 293-330  triton_b1024_w4 (builtin)
#   sk74 linear_10                    lines 332-332  reference (PyTorch)
#   sk75 layer_norm_2                 lines 52-333  triton_b1024_w4 (builtin)
#   sk76 zeros_like_cat_5             lines 156-156  reference (PyTorch)
#   sk77 linear_11                    lines 157-159  reference (PyTorch)
#   sk78 normalize_9                  lines 162-162  reference (PyTorch)
#   sk79 normalize_10                 lines 162-162  reference (PyTorch)
#   sk80 matmul_9                     lines 162-162  triton_gemm64x64x32_w4_s3_tf32x3 (builtin)
#   sk81 to_5                         lines 163-163  reference (PyTorch)
#   sk82 tensor_log_clamp_exp_5       lines 163-164  reference (PyTorch)
#   sk83 linear_relu_5                lines 166-166  reference (PyTorch)
#   sk84 linear_12                    lines 166-166  reference (PyTorch)
#   sk85 index_sigmoid_mul_add_5      lines 167-179  reference (PyTorch)
#   sk86 dropout_5                    lines 181-181  reference (PyTorch)
#   sk87 matmul_10                    lines 183-183  reference (PyTorch)
#   sk88 linear_dropout_7             lines 69-289  triton_gemm64x64x32_w4_s3_tf32x3_b1024_w4 (builtin)
#   sk89 layer_norm_add_5             lines 290-290  reference (PyTorch)
#   sk90 linear_gelu_dropout_5        lines 34-36  triton_gemm64x64x32_w4_s3_tf32x3_b1024_w4 (builtin)
#   sk91 linear_dropout_8             lines 37-38  triton_gemm64x64x32_w4_s3_tf32x3_b1024_w4 (builtin)
#   sk92 layer_norm_add_roll_3        lines 52-293  triton_b1024_w4 (builtin)
#   sk93 zeros_like_cat_6             lines 156-156  reference (PyTorch)
#   sk94 linear_13                    lines 157-159  reference (PyTorch)
#   sk95 normalize_11                 lines 162-162  reference (PyTorch)
#   sk96 normalize_12                 lines 162-162  reference (PyTorch)
#   sk97 matmul_11                    lines 162-162  triton_gemm64x64x32_w4_s3_tf32x3 (builtin)
#       (the kernel of sk80)
#   sk98 to_6                         lines 163-163  reference (PyTorch)
#   sk99 tensor_log_clamp_exp_6       lines 163-164  reference (PyTorch)
#   sk100 linear_relu_6                lines 166-166  reference (PyTorch)
#   sk101 linear_14                    lines 166-166  reference (PyTorch)
#   sk102 index_sigmoid_mul_add_6      lines 167-175  reference (PyTorch)
#   sk103 add_softmax_3                lines 175-177  reference (PyTorch)
#   sk104 dropout_6                    lines 181-181  reference (PyTorch)
#   sk105 matmul_12                    lines 183-183  reference (PyTorch)
#   sk106 linear_dropout_roll_3        lines 69-289  triton_gemm128x128x32_w8_s3_tf32x3_b1024_w4 (builtin)
#   sk107 layer_norm_add_6             lines 290-290  reference (PyTorch)
#   sk108 linear_gelu_dropout_6        lines 34-36  triton_gemm64x64x32_w4_s3_tf32x3_b1024_w4 (builtin)
#       (the kernel of sk90)
#   sk109 linear_dropout_9             lines 37-38  triton_gemm64x64x32_w4_s3_tf32x3_b1024_w4 (builtin)
#       (the kernel of sk91)
#   sk110 layer_norm_add_7             lines 52-293  triton_b1024_w4 (builtin)
#   sk111 zeros_like_cat_7             lines 156-156  reference (PyTorch)
#   sk112 linear_15                    lines 157-159  reference (PyTorch)
#   sk113 normalize_13                 lines 162-162  reference (PyTorch)
#   sk114 normalize_14                 lines 162-162  reference (PyTorch)
#   sk115 matmul_13                    lines 162-162  triton_gemm64x64x32_w4_s3_tf32x3 (builtin)
#       (the kernel of sk80)
#   sk116 to_7                         lines 163-163  reference (PyTorch)
#   sk117 tensor_log_clamp_exp_7       lines 163-164  reference (PyTorch)
#   sk118 linear_relu_7                lines 166-166  reference (PyTorch)
#   sk119 linear_16                    lines 166-166  reference (PyTorch)
#   sk120 index_sigmoid_mul_add_7      lines 167-179  reference (PyTorch)
#   sk121 dropout_7                    lines 181-181  reference (PyTorch)
#   sk122 matmul_14                    lines 183-183  reference (PyTorch)
#   sk123 linear_dropout_10            lines 69-289  triton_gemm64x64x32_w4_s3_tf32x3_b1024_w4 (builtin)
#       (the kernel of sk88)
#   sk124 layer_norm_add_8             lines 290-290  reference (PyTorch)
#   sk125 linear_gelu_dropout_7        lines 34-36  triton_gemm64x64x32_w4_s3_tf32x3_b1024_w4 (builtin)
#       (the kernel of sk90)
#   sk126 linear_dropout_11            lines 37-38  triton_gemm64x64x32_w4_s3_tf32x3_b1024_w4 (builtin)
#       (the kernel of sk91)
#   sk127 layer_norm_add_roll_4        lines 52-293  triton_b1024_w4 (builtin)
#       (the kernel of sk92)
#   sk128 zeros_like_cat_8             lines 156-156  reference (PyTorch)
#   sk129 linear_17                    lines 157-159  reference (PyTorch)
#   sk130 normalize_15                 lines 162-162  reference (PyTorch)
#   sk131 normalize_16                 lines 162-162  reference (PyTorch)
#   sk132 matmul_15                    lines 162-162  triton_gemm64x64x32_w4_s3_tf32x3 (builtin)
#       (the kernel of sk80)
#   sk133 to_8                         lines 163-163  reference (PyTorch)
#   sk134 tensor_log_clamp_exp_8       lines 163-164  reference (PyTorch)
#   sk135 linear_relu_8                lines 166-166  reference (PyTorch)
#   sk136 linear_18                    lines 166-166  reference (PyTorch)
#   sk137 index_sigmoid_mul_add_8      lines 167-175  reference (PyTorch)
#   sk138 add_softmax_4                lines 175-177  reference (PyTorch)
#   sk139 dropout_8                    lines 181-181  reference (PyTorch)
#   sk140 matmul_16                    lines 183-183  reference (PyTorch)
#   sk141 linear_dropout_roll_4        lines 69-289  triton_gemm128x128x32_w8_s3_tf32x3_b1024_w4 (builtin)
#       (the kernel of sk106)
#   sk142 layer_norm_add_9             lines 290-290  reference (PyTorch)
#   sk143 linear_gelu_dropout_8        lines 34-36  triton_gemm64x64x32_w4_s3_tf32x3_b1024_w4 (builtin)
#       (the kernel of sk90)
#   sk144 linear_dropout_12            lines 37-38  triton_gemm64x64x32_w4_s3_tf32x3_b1024_w4 (builtin)
#       (the kernel of sk91)
#   sk145 layer_norm_add_10            lines 52-293  triton_b1024_w4 (builtin)
#       (the kernel of sk110)
#   sk146 zeros_like_cat_9             lines 156-156  reference (PyTorch)
#   sk147 linear_19                    lines 157-159  reference (PyTorch)
#   sk148 normalize_17                 lines 162-162  reference (PyTorch)
#   sk149 normalize_18                 lines 162-162  reference (PyTorch)
#   sk150 matmul_17                    lines 162-162  triton_gemm64x64x32_w4_s3_tf32x3 (builtin)
#       (the kernel of sk80)
#   sk151 to_9                         lines 163-163  reference (PyTorch)
#   sk152 tensor_log_clamp_exp_9       lines 163-164  reference (PyTorch)
#   sk153 linear_relu_9                lines 166-166  reference (PyTorch)
#   sk154 linear_20                    lines 166-166  reference (PyTorch)
#   sk155 index_sigmoid_mul_add_9      lines 167-179  reference (PyTorch)
#   sk156 dropout_9                    lines 181-181  reference (PyTorch)
#   sk157 matmul_18                    lines 183-183  reference (PyTorch)
#   sk158 linear_dropout_13            lines 69-289  triton_gemm64x64x32_w4_s3_tf32x3_b1024_w4 (builtin)
#       (the kernel of sk88)
#   sk159 layer_norm_add_11            lines 290-290  reference (PyTorch)
#   sk160 linear_gelu_dropout_9        lines 34-36  triton_gemm64x64x32_w4_s3_tf32x3_b1024_w4 (builtin)
#       (the kernel of sk90)
#   sk161 linear_dropout_14            lines 37-38  triton_gemm64x64x32_w4_s3_tf32x3_b1024_w4 (builtin)
#       (the kernel of sk91)
#   sk162 layer_norm_add_roll_5        lines 52-293  triton_b1024_w4 (builtin)
#       (the kernel of sk92)
#   sk163 zeros_like_cat_10            lines 156-156  reference (PyTorch)
#   sk164 linear_21                    lines 157-159  reference (PyTorch)
#   sk165 normalize_19                 lines 162-162  reference (PyTorch)
#   sk166 normalize_20                 lines 162-162  reference (PyTorch)
#   sk167 matmul_19                    lines 162-162  triton_gemm64x64x32_w4_s3_tf32x3 (builtin)
#       (the kernel of sk80)
#   sk168 to_10                        lines 163-163  reference (PyTorch)
#   sk169 tensor_log_clamp_exp_10      lines 163-164  reference (PyTorch)
#   sk170 linear_relu_10               lines 166-166  reference (PyTorch)
#   sk171 linear_22                    lines 166-166  reference (PyTorch)
#   sk172 index_sigmoid_mul_add_10     lines 167-175  reference (PyTorch)
#   sk173 add_softmax_5                lines 175-177  reference (PyTorch)
#   sk174 dropout_10                   lines 181-181  reference (PyTorch)
#   sk175 matmul_20                    lines 183-183  reference (PyTorch)
#   sk176 linear_dropout_roll_5        lines 69-289  triton_gemm128x128x32_w8_s3_tf32x3_b1024_w4 (builtin)
#       (the kernel of sk106)
#   sk177 layer_norm_add_12            lines 290-290  reference (PyTorch)
#   sk178 linear_gelu_dropout_10       lines 34-36  triton_gemm64x64x32_w4_s3_tf32x3_b1024_w4 (builtin)
#       (the kernel of sk90)
#   sk179 linear_dropout_15            lines 37-38  triton_gemm64x64x32_w4_s3_tf32x3_b1024_w4 (builtin)
#       (the kernel of sk91)
#   sk180 layer_norm_add_cat_3         lines 293-330  triton_b1024_w4 (builtin)
#   sk181 linear_23                    lines 332-332  reference (PyTorch)
#   sk182 layer_norm_3                 lines 52-333  reference (PyTorch)
#   sk183 zeros_like_cat_11            lines 156-156  reference (PyTorch)
#   sk184 linear_24                    lines 157-159  reference (PyTorch)
#   sk185 normalize_21                 lines 162-162  triton_b1024_w4 (builtin)
#   sk186 normalize_22                 lines 162-162  reference (PyTorch)
#   sk187 matmul_21                    lines 162-162  triton_gemm64x64x32_w4_s3_tf32x3 (builtin)
#   sk188 to_11                        lines 163-163  reference (PyTorch)
#   sk189 tensor_log_clamp_exp_11      lines 163-164  reference (PyTorch)
#   sk190 linear_relu_11               lines 166-166  reference (PyTorch)
#   sk191 linear_25                    lines 166-166  reference (PyTorch)
#   sk192 index_sigmoid_mul_add_11     lines 167-179  reference (PyTorch)
#   sk193 dropout_11                   lines 181-181  reference (PyTorch)
#   sk194 matmul_22                    lines 183-183  reference (PyTorch)
#   sk195 linear_dropout_16            lines 69-289  triton_gemm64x64x32_w4_s3_tf32x3_b1024_w4 (builtin)
#   sk196 layer_norm_add_13            lines 290-290  reference (PyTorch)
#   sk197 linear_gelu_dropout_11       lines 34-36  triton_gemm64x64x32_w4_s3_tf32x3_b1024_w4 (builtin)
#   sk198 linear_dropout_17            lines 37-38  triton_gemm64x64x32_w4_s3_tf32x3_b1024_w4 (builtin)
#   sk199 layer_norm_add_14            lines 52-293  triton_b1024_w4 (builtin)
#   sk200 zeros_like_cat_12            lines 156-156  reference (PyTorch)
#   sk201 linear_26                    lines 157-159  reference (PyTorch)
#   sk202 normalize_23                 lines 162-162  triton_b1024_w4 (builtin)
#       (the kernel of sk185)
#   sk203 normalize_24                 lines 162-162  reference (PyTorch)
#   sk204 matmul_23                    lines 162-162  triton_gemm64x64x32_w4_s3_tf32x3 (builtin)
#       (the kernel of sk187)
#   sk205 to_12                        lines 163-163  reference (PyTorch)
#   sk206 tensor_log_clamp_exp_12      lines 163-164  reference (PyTorch)
#   sk207 linear_relu_12               lines 166-166  reference (PyTorch)
#   sk208 linear_27                    lines 166-166  reference (PyTorch)
#   sk209 index_sigmoid_mul_add_12     lines 167-179  reference (PyTorch)
#   sk210 dropout_12                   lines 181-181  reference (PyTorch)
#   sk211 matmul_24                    lines 183-183  reference (PyTorch)
#   sk212 linear_dropout_18            lines 69-289  triton_gemm64x64x32_w4_s3_tf32x3_b1024_w4 (builtin)
#       (the kernel of sk195)
#   sk213 layer_norm_add_15            lines 290-290  reference (PyTorch)
#   sk214 linear_gelu_dropout_12       lines 34-36  triton_gemm64x64x32_w4_s3_tf32x3_b1024_w4 (builtin)
#       (the kernel of sk197)
#   sk215 linear_dropout_19            lines 37-38  triton_gemm64x64x32_w4_s3_tf32x3_b1024_w4 (builtin)
#       (the kernel of sk198)
#   sk216 layer_norm_add_16            lines 293-293  reference (PyTorch)
#   sk217 layer_norm_4                 lines 522-523  reference (PyTorch)
#   sk218 adaptive_avg_pool1d          lines 523-524  reference (PyTorch)
#   sk219 linear_28                    lines 529-529  reference (PyTorch)

import math

import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl

# ---- the original module (verbatim) ----
# --------------------------------------------------------
# Swin Transformer V2
# Copyright (c) 2022 Microsoft
# Licensed under The MIT License [see LICENSE for details]
# Written by Ze Liu
# --------------------------------------------------------

import torch
import torch.nn as nn
import torch.nn.functional as F
import numpy as np
import collections
from itertools import repeat

def _ntuple(n):
    def parse(x):
        if isinstance(x, collections.abc.Iterable) and not isinstance(x, str):
            return tuple(x)
        return tuple(repeat(x, n))
    return parse
to_2tuple = _ntuple(2)

class Mlp(nn.Module):
    def __init__(self, in_features, hidden_features=None, out_features=None, act_layer=nn.GELU, drop=0.):
        super().__init__()
        out_features = out_features or in_features
        hidden_features = hidden_features or in_features
        self.fc1 = nn.Linear(in_features, hidden_features)
        self.act = act_layer()
        self.fc2 = nn.Linear(hidden_features, out_features)
        self.drop = nn.Dropout(drop)

    def forward(self, x):
        x = self.fc1(x)
        x = self.act(x)
        x = self.drop(x)
        x = self.fc2(x)
        x = self.drop(x)
        return x


def window_partition(x, window_size):
    """
    Args:
        x: (B, H, W, C)
        window_size (int): window size

    Returns:
        windows: (num_windows*B, window_size, window_size, C)
    """
    B, H, W, C = x.shape
    x = x.view(B, H // window_size, window_size, W // window_size, window_size, C)
    windows = x.permute(0, 1, 3, 2, 4, 5).contiguous().view(-1, window_size, window_size, C)
    return windows


def window_reverse(windows, window_size, H, W):
    """
    Args:
        windows: (num_windows*B, window_size, window_size, C)
        window_size (int): Window size
        H (int): Height of image
        W (int): Width of image

    Returns:
        x: (B, H, W, C)
    """
    B = int(windows.shape[0] / (H * W / window_size / window_size))
    x = windows.view(B, H // window_size, W // window_size, window_size, window_size, -1)
    x = x.permute(0, 1, 3, 2, 4, 5).contiguous().view(B, H, W, -1)
    return x


class WindowAttention(nn.Module):
    r""" Window based multi-head self attention (W-MSA) module with relative position bias.
    It supports both of shifted and non-shifted window.

    Args:
        dim (int): Number of input channels.
        window_size (tuple[int]): The height and width of the window.
        num_heads (int): Number of attention heads.
        qkv_bias (bool, optional):  If True, add a learnable bias to query, key, value. Default: True
        attn_drop (float, optional): Dropout ratio of attention weight. Default: 0.0
        proj_drop (float, optional): Dropout ratio of output. Default: 0.0
        pretrained_window_size (tuple[int]): The height and width of the window in pre-training.
    """

    def __init__(self, dim, window_size, num_heads, qkv_bias=True, attn_drop=0., proj_drop=0.,
                 pretrained_window_size=[0, 0]):

        super().__init__()
        self.dim = dim
        self.window_size = window_size  # Wh, Ww
        self.pretrained_window_size = pretrained_window_size
        self.num_heads = num_heads

        self.logit_scale = nn.Parameter(torch.log(10 * torch.ones((num_heads, 1, 1))), requires_grad=True)

        # mlp to generate continuous relative position bias
        self.cpb_mlp = nn.Sequential(nn.Linear(2, 512, bias=True),
                                     nn.ReLU(inplace=True),
                                     nn.Linear(512, num_heads, bias=False))

        # get relative_coords_table
        relative_coords_h = torch.arange(-(self.window_size[0] - 1), self.window_size[0], dtype=torch.float32)
        relative_coords_w = torch.arange(-(self.window_size[1] - 1), self.window_size[1], dtype=torch.float32)
        relative_coords_table = torch.stack(
            torch.meshgrid([relative_coords_h,
                            relative_coords_w])).permute(1, 2, 0).contiguous().unsqueeze(0)  # 1, 2*Wh-1, 2*Ww-1, 2
        if pretrained_window_size[0] > 0:
            relative_coords_table[:, :, :, 0] /= (pretrained_window_size[0] - 1)
            relative_coords_table[:, :, :, 1] /= (pretrained_window_size[1] - 1)
        else:
            relative_coords_table[:, :, :, 0] /= (self.window_size[0] - 1)
            relative_coords_table[:, :, :, 1] /= (self.window_size[1] - 1)
        relative_coords_table *= 8  # normalize to -8, 8
        relative_coords_table = torch.sign(relative_coords_table) * torch.log2(
            torch.abs(relative_coords_table) + 1.0) / np.log2(8)

        self.register_buffer("relative_coords_table", relative_coords_table)

        # get pair-wise relative position index for each token inside the window
        coords_h = torch.arange(self.window_size[0])
        coords_w = torch.arange(self.window_size[1])
        coords = torch.stack(torch.meshgrid([coords_h, coords_w]))  # 2, Wh, Ww
        coords_flatten = torch.flatten(coords, 1)  # 2, Wh*Ww
        relative_coords = coords_flatten[:, :, None] - coords_flatten[:, None, :]  # 2, Wh*Ww, Wh*Ww
        relative_coords = relative_coords.permute(1, 2, 0).contiguous()  # Wh*Ww, Wh*Ww, 2
        relative_coords[:, :, 0] += self.window_size[0] - 1  # shift to start from 0
        relative_coords[:, :, 1] += self.window_size[1] - 1
        relative_coords[:, :, 0] *= 2 * self.window_size[1] - 1
        relative_position_index = relative_coords.sum(-1)  # Wh*Ww, Wh*Ww
        self.register_buffer("relative_position_index", relative_position_index)

        self.qkv = nn.Linear(dim, dim * 3, bias=False)
        if qkv_bias:
            self.q_bias = nn.Parameter(torch.zeros(dim))
            self.v_bias = nn.Parameter(torch.zeros(dim))
        else:
            self.q_bias = None
            self.v_bias = None
        self.attn_drop = nn.Dropout(attn_drop)
        self.proj = nn.Linear(dim, dim)
        self.proj_drop = nn.Dropout(proj_drop)
        self.softmax = nn.Softmax(dim=-1)

    def forward(self, x, mask=None):
        """
        Args:
            x: input features with shape of (num_windows*B, N, C)
            mask: (0/-inf) mask with shape of (num_windows, Wh*Ww, Wh*Ww) or None
        """
        B_, N, C = x.shape
        qkv_bias = None
        if self.q_bias is not None:
            qkv_bias = torch.cat((self.q_bias, torch.zeros_like(self.v_bias, requires_grad=False), self.v_bias))
        qkv = F.linear(input=x, weight=self.qkv.weight, bias=qkv_bias)
        qkv = qkv.reshape(B_, N, 3, self.num_heads, -1).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]  # make torchscript happy (cannot use tensor as tuple)

        # cosine attention
        attn = (F.normalize(q, dim=-1) @ F.normalize(k, dim=-1).transpose(-2, -1))
        logit_scale = torch.clamp(self.logit_scale.to(x.device), max=torch.log(torch.tensor(1. / 0.01, device=x.device))).exp()
        attn = attn * logit_scale

        relative_position_bias_table = self.cpb_mlp(self.relative_coords_table).view(-1, self.num_heads)
        relative_position_bias = relative_position_bias_table[self.relative_position_index.view(-1)].view(
            self.window_size[0] * self.window_size[1], self.window_size[0] * self.window_size[1], -1)  # Wh*Ww,Wh*Ww,nH
        relative_position_bias = relative_position_bias.permute(2, 0, 1).contiguous()  # nH, Wh*Ww, Wh*Ww
        relative_position_bias = 16 * torch.sigmoid(relative_position_bias)
        attn = attn + relative_position_bias.unsqueeze(0)

        if mask is not None:
            nW = mask.shape[0]
            attn = attn.view(B_ // nW, nW, self.num_heads, N, N) + mask.unsqueeze(1).unsqueeze(0)
            attn = attn.view(-1, self.num_heads, N, N)
            attn = self.softmax(attn)
        else:
            attn = self.softmax(attn)

        attn = self.attn_drop(attn)

        x = (attn @ v).transpose(1, 2).reshape(B_, N, C)
        x = self.proj(x)
        x = self.proj_drop(x)
        return x

class SwinTransformerBlock(nn.Module):
    r""" Swin Transformer Block.

    Args:
        dim (int): Number of input channels.
        input_resolution (tuple[int]): Input resulotion.
        num_heads (int): Number of attention heads.
        window_size (int): Window size.
        shift_size (int): Shift size for SW-MSA.
        mlp_ratio (float): Ratio of mlp hidden dim to embedding dim.
        qkv_bias (bool, optional): If True, add a learnable bias to query, key, value. Default: True
        drop (float, optional): Dropout rate. Default: 0.0
        attn_drop (float, optional): Attention dropout rate. Default: 0.0
        drop_path (float, optional): Stochastic depth rate. Default: 0.0
        act_layer (nn.Module, optional): Activation layer. Default: nn.GELU
        norm_layer (nn.Module, optional): Normalization layer.  Default: nn.LayerNorm
        pretrained_window_size (int): Window size in pre-training.
    """

    def __init__(self, dim, input_resolution, num_heads, window_size=7, shift_size=0,
                 mlp_ratio=4., qkv_bias=True, drop=0., attn_drop=0., drop_path=0.,
                 act_layer=nn.GELU, norm_layer=nn.LayerNorm, pretrained_window_size=0):
        super().__init__()
        self.dim = dim
        self.input_resolution = input_resolution
        self.num_heads = num_heads
        self.window_size = window_size
        self.shift_size = shift_size
        self.mlp_ratio = mlp_ratio
        if min(self.input_resolution) <= self.window_size:
            # if window size is larger than input resolution, we don't partition windows
            self.shift_size = 0
            self.window_size = min(self.input_resolution)
        assert 0 <= self.shift_size < self.window_size, "shift_size must in 0-window_size"

        self.norm1 = norm_layer(dim)
        self.attn = WindowAttention(
            dim, window_size=to_2tuple(self.window_size), num_heads=num_heads,
            qkv_bias=qkv_bias, attn_drop=attn_drop, proj_drop=drop,
            pretrained_window_size=to_2tuple(pretrained_window_size))

        self.drop_path = nn.Identity()
        self.norm2 = norm_layer(dim)
        mlp_hidden_dim = int(dim * mlp_ratio)
        self.mlp = Mlp(in_features=dim, hidden_features=mlp_hidden_dim, act_layer=act_layer, drop=drop)

        if self.shift_size > 0:
            # calculate attention mask for SW-MSA
            H, W = self.input_resolution
            img_mask = torch.zeros((1, H, W, 1))  # 1 H W 1
            h_slices = (slice(0, -self.window_size),
                        slice(-self.window_size, -self.shift_size),
                        slice(-self.shift_size, None))
            w_slices = (slice(0, -self.window_size),
                        slice(-self.window_size, -self.shift_size),
                        slice(-self.shift_size, None))
            cnt = 0
            for h in h_slices:
                for w in w_slices:
                    img_mask[:, h, w, :] = cnt
                    cnt += 1

            mask_windows = window_partition(img_mask, self.window_size)  # nW, window_size, window_size, 1
            mask_windows = mask_windows.view(-1, self.window_size * self.window_size)
            attn_mask = mask_windows.unsqueeze(1) - mask_windows.unsqueeze(2)
            attn_mask = attn_mask.masked_fill(attn_mask != 0, float(-100.0)).masked_fill(attn_mask == 0, float(0.0))
        else:
            attn_mask = None

        self.register_buffer("attn_mask", attn_mask)

    def forward(self, x):
        H, W = self.input_resolution
        B, L, C = x.shape
        assert L == H * W, "input feature has wrong size"

        shortcut = x
        x = x.view(B, H, W, C)

        # cyclic shift
        if self.shift_size > 0:
            shifted_x = torch.roll(x, shifts=(-self.shift_size, -self.shift_size), dims=(1, 2))
        else:
            shifted_x = x

        # partition windows
        x_windows = window_partition(shifted_x, self.window_size)  # nW*B, window_size, window_size, C
        x_windows = x_windows.view(-1, self.window_size * self.window_size, C)  # nW*B, window_size*window_size, C

        # W-MSA/SW-MSA
        attn_windows = self.attn(x_windows, mask=self.attn_mask)  # nW*B, window_size*window_size, C

        # merge windows
        attn_windows = attn_windows.view(-1, self.window_size, self.window_size, C)
        shifted_x = window_reverse(attn_windows, self.window_size, H, W)  # B H' W' C

        # reverse cyclic shift
        if self.shift_size > 0:
            x = torch.roll(shifted_x, shifts=(self.shift_size, self.shift_size), dims=(1, 2))
        else:
            x = shifted_x
        x = x.view(B, H * W, C)
        x = shortcut + self.drop_path(self.norm1(x))

        # FFN
        x = x + self.drop_path(self.norm2(self.mlp(x)))

        return x


class PatchMerging(nn.Module):
    r""" Patch Merging Layer.

    Args:
        input_resolution (tuple[int]): Resolution of input feature.
        dim (int): Number of input channels.
        norm_layer (nn.Module, optional): Normalization layer.  Default: nn.LayerNorm
    """

    def __init__(self, input_resolution, dim, norm_layer=nn.LayerNorm):
        super().__init__()
        self.input_resolution = input_resolution
        self.dim = dim
        self.reduction = nn.Linear(4 * dim, 2 * dim, bias=False)
        self.norm = norm_layer(2 * dim)

    def forward(self, x):
        """
        x: B, H*W, C
        """
        H, W = self.input_resolution
        B, L, C = x.shape
        assert L == H * W, "input feature has wrong size"
        assert H % 2 == 0 and W % 2 == 0, f"x size ({H}*{W}) are not even."

        x = x.view(B, H, W, C)

        x0 = x[:, 0::2, 0::2, :]  # B H/2 W/2 C
        x1 = x[:, 1::2, 0::2, :]  # B H/2 W/2 C
        x2 = x[:, 0::2, 1::2, :]  # B H/2 W/2 C
        x3 = x[:, 1::2, 1::2, :]  # B H/2 W/2 C
        x = torch.cat([x0, x1, x2, x3], -1)  # B H/2 W/2 4*C
        x = x.view(B, -1, 4 * C)  # B H/2*W/2 4*C

        x = self.reduction(x)
        x = self.norm(x)

        return x

class BasicLayer(nn.Module):
    """ A basic Swin Transformer layer for one stage.

    Args:
        dim (int): Number of input channels.
        input_resolution (tuple[int]): Input resolution.
        depth (int): Number of blocks.
        num_heads (int): Number of attention heads.
        window_size (int): Local window size.
        mlp_ratio (float): Ratio of mlp hidden dim to embedding dim.
        qkv_bias (bool, optional): If True, add a learnable bias to query, key, value. Default: True
        drop (float, optional): Dropout rate. Default: 0.0
        attn_drop (float, optional): Attention dropout rate. Default: 0.0
        drop_path (float | tuple[float], optional): Stochastic depth rate. Default: 0.0
        norm_layer (nn.Module, optional): Normalization layer. Default: nn.LayerNorm
        downsample (nn.Module | None, optional): Downsample layer at the end of the layer. Default: None
        use_checkpoint (bool): Whether to use checkpointing to save memory. Default: False.
        pretrained_window_size (int): Local window size in pre-training.
    """

    def __init__(self, dim, input_resolution, depth, num_heads, window_size,
                 mlp_ratio=4., qkv_bias=True, drop=0., attn_drop=0.,
                 drop_path=0., norm_layer=nn.LayerNorm, downsample=None, use_checkpoint=False,
                 pretrained_window_size=0):

        super().__init__()
        self.dim = dim
        self.input_resolution = input_resolution
        self.depth = depth
        self.use_checkpoint = use_checkpoint

        # build blocks
        self.blocks = nn.ModuleList([
            SwinTransformerBlock(dim=dim, input_resolution=input_resolution,
                                 num_heads=num_heads, window_size=window_size,
                                 shift_size=0 if (i % 2 == 0) else window_size // 2,
                                 mlp_ratio=mlp_ratio,
                                 qkv_bias=qkv_bias,
                                 drop=drop, attn_drop=attn_drop,
                                 drop_path=drop_path[i] if isinstance(drop_path, list) else drop_path,
                                 norm_layer=norm_layer,
                                 pretrained_window_size=pretrained_window_size)
            for i in range(depth)])

        # patch merging layer
        if downsample is not None:
            self.downsample = downsample(input_resolution, dim=dim, norm_layer=norm_layer)
        else:
            self.downsample = None

    def forward(self, x):
        for blk in self.blocks:
            if self.use_checkpoint:
                x = checkpoint.checkpoint(blk, x)
            else:
                x = blk(x)
        if self.downsample is not None:
            x = self.downsample(x)
        return x
    

class PatchEmbed(nn.Module):
    r""" Image to Patch Embedding

    Args:
        img_size (int): Image size.  Default: 224.
        patch_size (int): Patch token size. Default: 4.
        in_chans (int): Number of input image channels. Default: 3.
        embed_dim (int): Number of linear projection output channels. Default: 96.
        norm_layer (nn.Module, optional): Normalization layer. Default: None
    """

    def __init__(self, img_size=224, patch_size=4, in_chans=3, embed_dim=96, norm_layer=None):
        super().__init__()
        img_size = to_2tuple(img_size)
        patch_size = to_2tuple(patch_size)
        patches_resolution = [img_size[0] // patch_size[0], img_size[1] // patch_size[1]]
        self.img_size = img_size
        self.patch_size = patch_size
        self.patches_resolution = patches_resolution
        self.num_patches = patches_resolution[0] * patches_resolution[1]

        self.in_chans = in_chans
        self.embed_dim = embed_dim

        self.proj = nn.Conv2d(in_chans, embed_dim, kernel_size=patch_size, stride=patch_size)
        if norm_layer is not None:
            self.norm = norm_layer(embed_dim)
        else:
            self.norm = None

    def forward(self, x):
        B, C, H, W = x.shape
        # FIXME look at relaxing size constraints
        assert H == self.img_size[0] and W == self.img_size[1], \
            f"Input image size ({H}*{W}) doesn't match model ({self.img_size[0]}*{self.img_size[1]})."
        x = self.proj(x).flatten(2).transpose(1, 2)  # B Ph*Pw C
        if self.norm is not None:
            x = self.norm(x)
        return x


class Model(nn.Module):
    r""" Swin Transformer
        A PyTorch impl of : `Swin Transformer: Hierarchical Vision Transformer using Shifted Windows`  -
          https://arxiv.org/pdf/2103.14030

    Args:
        img_size (int | tuple(int)): Input image size. Default 224
        patch_size (int | tuple(int)): Patch size. Default: 4
        in_chans (int): Number of input image channels. Default: 3
        num_classes (int): Number of classes for classification head. Default: 1000
        embed_dim (int): Patch embedding dimension. Default: 96
        depths (tuple(int)): Depth of each Swin Transformer layer.
        num_heads (tuple(int)): Number of attention heads in different layers.
        window_size (int): Window size. Default: 7
        mlp_ratio (float): Ratio of mlp hidden dim to embedding dim. Default: 4
        qkv_bias (bool): If True, add a learnable bias to query, key, value. Default: True
        drop_rate (float): Dropout rate. Default: 0
        attn_drop_rate (float): Attention dropout rate. Default: 0
        drop_path_rate (float): Stochastic depth rate. Default: 0.1
        norm_layer (nn.Module): Normalization layer. Default: nn.LayerNorm.
        patch_norm (bool): If True, add normalization after patch embedding. Default: True
        use_checkpoint (bool): Whether to use checkpointing to save memory. Default: False
        pretrained_window_sizes (tuple(int)): Pretrained window sizes of each layer.
    """

    def __init__(self, img_size=224, patch_size=4, in_chans=3, num_classes=1000,
                 embed_dim=96, depths=[2, 2, 6, 2], num_heads=[3, 6, 12, 24],
                 window_size=7, mlp_ratio=4., qkv_bias=True,
                 drop_rate=0., attn_drop_rate=0., drop_path_rate=0.1,
                 norm_layer=nn.LayerNorm, patch_norm=True,
                 use_checkpoint=False, pretrained_window_sizes=[0, 0, 0, 0], **kwargs):
        super().__init__()

        self.num_classes = num_classes
        self.num_layers = len(depths)
        self.embed_dim = embed_dim
        self.patch_norm = patch_norm
        self.num_features = int(embed_dim * 2 ** (self.num_layers - 1))
        self.mlp_ratio = mlp_ratio

        # split image into non-overlapping patches
        self.patch_embed = PatchEmbed(
            img_size=img_size, patch_size=patch_size, in_chans=in_chans, embed_dim=embed_dim,
            norm_layer=norm_layer if self.patch_norm else None)
        num_patches = self.patch_embed.num_patches
        patches_resolution = self.patch_embed.patches_resolution
        self.patches_resolution = patches_resolution

        self.pos_drop = nn.Dropout(p=drop_rate)

        # stochastic depth
        dpr = [x.item() for x in torch.linspace(0, drop_path_rate, sum(depths))]  # stochastic depth decay rule

        # build layers
        self.layers = nn.ModuleList()
        for i_layer in range(self.num_layers):
            layer = BasicLayer(dim=int(embed_dim * 2 ** i_layer),
                               input_resolution=(patches_resolution[0] // (2 ** i_layer),
                                                 patches_resolution[1] // (2 ** i_layer)),
                               depth=depths[i_layer],
                               num_heads=num_heads[i_layer],
                               window_size=window_size,
                               mlp_ratio=self.mlp_ratio,
                               qkv_bias=qkv_bias,
                               drop=drop_rate, attn_drop=attn_drop_rate,
                               drop_path=dpr[sum(depths[:i_layer]):sum(depths[:i_layer + 1])],
                               norm_layer=norm_layer,
                               downsample=PatchMerging if (i_layer < self.num_layers - 1) else None,
                               use_checkpoint=use_checkpoint,
                               pretrained_window_size=pretrained_window_sizes[i_layer])
            self.layers.append(layer)

        self.norm = norm_layer(self.num_features)
        self.avgpool = nn.AdaptiveAvgPool1d(1)
        self.head = nn.Linear(self.num_features, num_classes) if num_classes > 0 else nn.Identity()

    def forward_features(self, x):
        x = self.patch_embed(x)
        x = self.pos_drop(x)

        for layer in self.layers:
            x = layer(x)

        x = self.norm(x)  # B L C
        x = self.avgpool(x.transpose(1, 2))  # B C 1
        x = torch.flatten(x, 1)
        return x

    def forward(self, x):
        x = self.forward_features(x)
        x = self.head(x)
        return x

batch_size = 10
image_size = 224

def get_inputs():
    return [torch.rand(batch_size, 3, image_size, image_size)]

def get_init_inputs():
    return []


# ---- sk1 layer_norm_dropout: triton_rows_b1024_w4 (builtin) ----
"""Subkernel layer_norm_dropout (lines 52-517), builtin variant triton_rows_b1024_w4.

Generated by MKEvolve's builtin proposer; sizes are read from the tensors at run time.
"""



@triton.jit
def sk1__norm_rows_layer_norm_kernel1(v253_ptr, w_ptr, b_ptr, epi_v255_ptr, epi_D0, epi_D1, epi_D2, ROWS, M, RB: tl.constexpr, MB: tl.constexpr,
        IDX64: tl.constexpr):
    # replaces: torch.nn.functional.layer_norm (line 435)
    # layer_norm: RB whole rows per program in registers, one read of the input
    pid = tl.program_id(0)
    rr = tl.arange(0, RB)
    cc = tl.arange(0, MB)
    if IDX64:  # more than 2**31 elements: 64-bit addresses
        pid = pid.to(tl.int64)
        rr = rr.to(tl.int64)
        cc = cc.to(tl.int64)
    row = (pid * RB + rr)[:, None]
    r = cc[None, :]
    mask = (row < ROWS) & (r < M)
    offs = row * M + r
    x = tl.load(v253_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    x = tl.where(mask, x, 0.0)
    gmean = tl.sum(x, axis=1) / M
    d = tl.where(mask, x - gmean[:, None], 0.0)
    var = tl.sum(d * d, axis=1) / M
    rstd = 1.0 / tl.sqrt(var + 1e-05)
    y = d * rstd[:, None]
    ch = r
    y = y * tl.load(w_ptr + ch, mask=mask, other=1.0)
    y = y + tl.load(b_ptr + ch, mask=mask, other=0.0)
    # fused epilogue
    v255 = y  # dropout (line 517)
    tl.store(epi_v255_ptr + offs, v255, mask=mask)


def sk1_run(v253, patch_embed_norm_weight, patch_embed_norm_bias):
    # replaces: torch.nn.functional.layer_norm (line 435)
    # replaces: torch.nn.functional.dropout (line 517)
    in254 = v253.shape
    in254_device = v253.device
    numel254 = math.prod(in254)
    m254 = math.prod(in254[2:])
    rows254 = numel254 // max(m254, 1)
    lay254 = ()
    out254 = tuple(in254)
    v255 = torch.empty(out254, device=in254_device, dtype=torch.float32)
    if rows254 * m254 > 0:
        mb254 = triton.next_power_of_2(m254)
        if mb254 > 8192:
            raise ValueError("rows longer than the register tile of this variant")
        rb254 = max(1, 1024 // mb254)
        sk1__norm_rows_layer_norm_kernel1[(triton.cdiv(rows254, rb254),)](
            v253.contiguous(), patch_embed_norm_weight.contiguous(), patch_embed_norm_bias.contiguous(), v255, out254[0], out254[1], out254[2], rows254, m254, *lay254, RB=rb254, MB=mb254, IDX64=numel254 >= 2**31,
            num_warps=max(4, min(16, rb254 * mb254 // 512)))  # <= 16 values/thread
    # replaces: torch.Tensor.view (line 265)
    v256 = v255.view(10, 56, 56, 96)
    # replaces: torch.Tensor.view (line 52)
    v257 = v256.view(10, 8, 7, 8, 7, 96)
    # replaces: torch.Tensor.permute (line 53)
    v258 = v257.permute(0, 1, 3, 2, 4, 5)
    # replaces: torch.Tensor.contiguous (line 53)
    v259 = v258.contiguous()
    # replaces: torch.Tensor.view (line 53)
    v260 = v259.view(-1, 7, 7, 96)
    # replaces: torch.Tensor.view (line 275)
    v261 = v260.view(-1, 49, 96)
    return v255, v261


# ---- sk6 matmul: triton_gemm64x64x32_w4_s3_tf32x3 (builtin) ----
"""Subkernel matmul (lines 162-162), builtin variant triton_gemm64x64x32_w4_s3_tf32x3.

Generated by MKEvolve's builtin proposer; sizes are read from the tensors at run time.
"""



@triton.jit
def sk6__gemm_matmul_kernel1(a_ptr, b_ptr, v273_ptr, M, N, K, stride_ab, stride_am, stride_ak,
        stride_bb, stride_bk, stride_bn, B1, stride_ab1, stride_bb1,
        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
        BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, IDX64: tl.constexpr):
    # replaces: torch.Tensor.matmul (line 162)
    # grouped program order: GROUP_M row tiles share each column tile in L2;
    # batches on the same grid axis (dim 1 of a grid allows only 65535)
    pid = tl.program_id(0)
    num_m = tl.cdiv(M, BLOCK_M)
    num_n = tl.cdiv(N, BLOCK_N)
    batch = pid // (num_m * num_n)
    pid = pid % (num_m * num_n)
    group = pid // (GROUP_M * num_n)
    first_m = group * GROUP_M
    group_size = tl.minimum(num_m - first_m, GROUP_M)
    pid_m = first_m + (pid % group_size)
    pid_n = (pid % (GROUP_M * num_n)) // group_size
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    if IDX64:  # an operand's storage or the result has more than 2**31 elements
        batch = batch.to(tl.int64)
        rm = rm.to(tl.int64)
        rn = rn.to(tl.int64)
        rk = rk.to(tl.int64)
    # a second batch dim (4-d: heads) of B1, each operand by its own strides
    b0 = batch // B1
    b1 = batch % B1
    a_base = a_ptr + b0 * stride_ab + b1 * stride_ab1
    b_base = b_ptr + b0 * stride_bb + b1 * stride_bb1
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        kk = k0 + rk
        a = tl.load(a_base + rm[:, None] * stride_am + kk[None, :] * stride_ak,
                    mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
        b = tl.load(b_base + kk[:, None] * stride_bk + rn[None, :] * stride_bn,
                    mask=(kk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(a, b, input_precision="tf32x3")
    offs = batch * M * N + rm[:, None] * N + rn[None, :]
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    tl.store(v273_ptr + offs, acc, mask=mask)


def sk6_run(v270, v272):
    # replaces: torch.Tensor.matmul (line 162)
    a273 = v270
    b273 = v272
    bat273, b1_273, m273, k273 = a273.shape
    if tuple(b273.shape[:2]) != (bat273, b1_273):
        raise ValueError("batch dims do not match")
    n273 = b273.shape[3]
    batch273 = bat273 * b1_273
    sab273, sab1_273, sam273, sak273 = a273.stride()
    sbb273, sbb1_273, sbk273, sbn273 = b273.stride()
    out273 = (bat273, b1_273, m273, n273)
    if k273 != (b273.shape[0] if False else b273.shape[-2]):
        raise ValueError("matrix shapes do not match")
    v273 = torch.empty(out273, device=a273.device, dtype=torch.float32)
    if m273 * n273 * batch273 > 0:
        grid = (triton.cdiv(m273, 64) * triton.cdiv(n273, 64) * batch273,)
        sk6__gemm_matmul_kernel1[grid](
            a273, b273, v273, m273, n273, k273, sab273, sam273, sak273, sbb273, sbk273, sbn273,
            b1_273, sab1_273, sbb1_273,
            BLOCK_M=64, BLOCK_N=64, BLOCK_K=32, GROUP_M=8,
            IDX64=max(a273.untyped_storage().nbytes() // 4,
                      b273.untyped_storage().nbytes() // 4, batch273 * m273 * n273) >= 2**31,
            num_warps=4, num_stages=3)
    return v273


# ---- sk14 linear_dropout: triton_gemm128x128x32_w8_s3_tf32x3_b1024_w4 (builtin) ----
"""Subkernel linear_dropout (lines 69-289), builtin variant triton_gemm128x128x32_w8_s3_tf32x3_b1024_w4.

Generated by MKEvolve's builtin proposer; sizes are read from the tensors at run time.
"""



@triton.jit
def sk14__gemm_linear_kernel1(a_ptr, b_ptr, bias_ptr, epi_v299_ptr, epi_D0, epi_D1, epi_D2, M, N, K, stride_ab, stride_am, stride_ak,
        stride_bb, stride_bk, stride_bn, B1, stride_ab1, stride_bb1,
        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
        BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, IDX64: tl.constexpr):
    # replaces: torch.nn.functional.linear (line 184)
    # grouped program order: GROUP_M row tiles share each column tile in L2;
    # batches on the same grid axis (dim 1 of a grid allows only 65535)
    pid = tl.program_id(0)
    num_m = tl.cdiv(M, BLOCK_M)
    num_n = tl.cdiv(N, BLOCK_N)
    batch = pid // (num_m * num_n)
    pid = pid % (num_m * num_n)
    group = pid // (GROUP_M * num_n)
    first_m = group * GROUP_M
    group_size = tl.minimum(num_m - first_m, GROUP_M)
    pid_m = first_m + (pid % group_size)
    pid_n = (pid % (GROUP_M * num_n)) // group_size
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    if IDX64:  # an operand's storage or the result has more than 2**31 elements
        batch = batch.to(tl.int64)
        rm = rm.to(tl.int64)
        rn = rn.to(tl.int64)
        rk = rk.to(tl.int64)
    # a second batch dim (4-d: heads) of B1, each operand by its own strides
    b0 = batch // B1
    b1 = batch % B1
    a_base = a_ptr + b0 * stride_ab + b1 * stride_ab1
    b_base = b_ptr + b0 * stride_bb + b1 * stride_bb1
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        kk = k0 + rk
        a = tl.load(a_base + rm[:, None] * stride_am + kk[None, :] * stride_ak,
                    mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
        b = tl.load(b_base + kk[:, None] * stride_bk + rn[None, :] * stride_bn,
                    mask=(kk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(a, b, input_precision="tf32x3")
    acc += tl.load(bias_ptr + rn, mask=rn < N, other=0.0)[None, :]
    offs = batch * M * N + rm[:, None] * N + rn[None, :]
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    # fused epilogue
    v299 = acc  # dropout (line 185)
    tl.store(epi_v299_ptr + offs, v299, mask=mask)


def sk14_run(v297, layers_0_blocks_0_attn_proj_weight, layers_0_blocks_0_attn_proj_bias):
    # replaces: torch.nn.functional.linear (line 184)
    # replaces: torch.nn.functional.dropout (line 185)
    a298 = v297.contiguous()
    b298 = layers_0_blocks_0_attn_proj_weight
    b1_298, sab1_298, sbb1_298 = 1, 0, 0
    k298 = a298.shape[-1]
    m298 = a298.numel() // max(k298, 1)
    batch298, sab298, sam298, sak298 = 1, 0, k298, 1
    n298 = b298.shape[0]
    sbb298, sbk298, sbn298 = 0, b298.stride(1), b298.stride(0)
    out298 = tuple(a298.shape[:-1]) + (n298,)
    if k298 != (b298.shape[1] if True else b298.shape[-2]):
        raise ValueError("matrix shapes do not match")
    v299 = torch.empty(out298, device=a298.device, dtype=torch.float32)
    if m298 * n298 * batch298 > 0:
        grid = (triton.cdiv(m298, 128) * triton.cdiv(n298, 128) * batch298,)
        sk14__gemm_linear_kernel1[grid](
            a298, b298, layers_0_blocks_0_attn_proj_bias, v299, out298[0], out298[1], out298[2], m298, n298, k298, sab298, sam298, sak298, sbb298, sbk298, sbn298,
            b1_298, sab1_298, sbb1_298,
            BLOCK_M=128, BLOCK_N=128, BLOCK_K=32, GROUP_M=8,
            IDX64=max(a298.untyped_storage().nbytes() // 4,
                      b298.untyped_storage().nbytes() // 4, batch298 * m298 * n298) >= 2**31,
            num_warps=8, num_stages=3)
    # replaces: torch.Tensor.view (line 281)
    v300 = v299.view(-1, 7, 7, 96)
    # replaces: torch.Tensor.view (line 69)
    v301 = v300.view(10, 8, 8, 7, 7, -1)
    # replaces: torch.Tensor.permute (line 70)
    v302 = v301.permute(0, 1, 3, 2, 4, 5)
    # replaces: torch.Tensor.contiguous (line 70)
    v303 = v302.contiguous()
    # replaces: torch.Tensor.view (line 70)
    v304 = v303.view(10, 56, 56, -1)
    # replaces: torch.Tensor.view (line 289)
    v305 = v304.view(10, 3136, 96)
    return v305


# ---- sk15 layer_norm_add: triton_rows_b1024_w4 (builtin) ----
"""Subkernel layer_norm_add (lines 290-290), builtin variant triton_rows_b1024_w4.

Generated by MKEvolve's builtin proposer; sizes are read from the tensors at run time.
"""



@triton.jit
def sk15__norm_rows_layer_norm_kernel1(v305_ptr, w_ptr, b_ptr, epi_v255_ptr, epi_v307_ptr, epi_D0, epi_D1, epi_D2, ROWS, M, RB: tl.constexpr, MB: tl.constexpr,
        IDX64: tl.constexpr):
    # replaces: torch.nn.functional.layer_norm (line 290)
    # layer_norm: RB whole rows per program in registers, one read of the input
    pid = tl.program_id(0)
    rr = tl.arange(0, RB)
    cc = tl.arange(0, MB)
    if IDX64:  # more than 2**31 elements: 64-bit addresses
        pid = pid.to(tl.int64)
        rr = rr.to(tl.int64)
        cc = cc.to(tl.int64)
    row = (pid * RB + rr)[:, None]
    r = cc[None, :]
    mask = (row < ROWS) & (r < M)
    offs = row * M + r
    x = tl.load(v305_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    x = tl.where(mask, x, 0.0)
    gmean = tl.sum(x, axis=1) / M
    d = tl.where(mask, x - gmean[:, None], 0.0)
    var = tl.sum(d * d, axis=1) / M
    rstd = 1.0 / tl.sqrt(var + 1e-05)
    y = d * rstd[:, None]
    ch = r
    y = y * tl.load(w_ptr + ch, mask=mask, other=1.0)
    y = y + tl.load(b_ptr + ch, mask=mask, other=0.0)
    # fused epilogue
    epi_v255 = tl.load(epi_v255_ptr + offs, mask=mask, other=0)
    v307 = epi_v255 + y  # add (line 290)
    tl.store(epi_v307_ptr + offs, v307, mask=mask)


def sk15_run(v305, layers_0_blocks_0_norm1_weight, layers_0_blocks_0_norm1_bias, v255):
    # replaces: torch.nn.functional.layer_norm (line 290)
    # replaces: torch.Tensor.add (line 290)
    in306 = v305.shape
    in306_device = v305.device
    numel306 = math.prod(in306)
    m306 = math.prod(in306[2:])
    rows306 = numel306 // max(m306, 1)
    lay306 = ()
    out306 = tuple(in306)
    v307 = torch.empty(out306, device=in306_device, dtype=torch.float32)
    if rows306 * m306 > 0:
        mb306 = triton.next_power_of_2(m306)
        if mb306 > 8192:
            raise ValueError("rows longer than the register tile of this variant")
        rb306 = max(1, 1024 // mb306)
        sk15__norm_rows_layer_norm_kernel1[(triton.cdiv(rows306, rb306),)](
            v305.contiguous(), layers_0_blocks_0_norm1_weight.contiguous(), layers_0_blocks_0_norm1_bias.contiguous(), v255.contiguous(), v307, out306[0], out306[1], out306[2], rows306, m306, *lay306, RB=rb306, MB=mb306, IDX64=numel306 >= 2**31,
            num_warps=max(4, min(16, rb306 * mb306 // 512)))  # <= 16 values/thread
    return v307


# ---- sk16 linear_gelu_dropout: triton_gemm64x64x32_w4_s3_tf32x3_b1024_w4 (builtin) ----
"""Subkernel linear_gelu_dropout (lines 34-36), builtin variant triton_gemm64x64x32_w4_s3_tf32x3_b1024_w4.

Generated by MKEvolve's builtin proposer; sizes are read from the tensors at run time.
"""



@triton.jit
def sk16__gemm_linear_kernel1(a_ptr, b_ptr, bias_ptr, epi_v310_ptr, epi_D0, epi_D1, epi_D2, M, N, K, stride_ab, stride_am, stride_ak,
        stride_bb, stride_bk, stride_bn, B1, stride_ab1, stride_bb1,
        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
        BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, IDX64: tl.constexpr):
    # replaces: torch.nn.functional.linear (line 34)
    # grouped program order: GROUP_M row tiles share each column tile in L2;
    # batches on the same grid axis (dim 1 of a grid allows only 65535)
    pid = tl.program_id(0)
    num_m = tl.cdiv(M, BLOCK_M)
    num_n = tl.cdiv(N, BLOCK_N)
    batch = pid // (num_m * num_n)
    pid = pid % (num_m * num_n)
    group = pid // (GROUP_M * num_n)
    first_m = group * GROUP_M
    group_size = tl.minimum(num_m - first_m, GROUP_M)
    pid_m = first_m + (pid % group_size)
    pid_n = (pid % (GROUP_M * num_n)) // group_size
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    if IDX64:  # an operand's storage or the result has more than 2**31 elements
        batch = batch.to(tl.int64)
        rm = rm.to(tl.int64)
        rn = rn.to(tl.int64)
        rk = rk.to(tl.int64)
    # a second batch dim (4-d: heads) of B1, each operand by its own strides
    b0 = batch // B1
    b1 = batch % B1
    a_base = a_ptr + b0 * stride_ab + b1 * stride_ab1
    b_base = b_ptr + b0 * stride_bb + b1 * stride_bb1
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        kk = k0 + rk
        a = tl.load(a_base + rm[:, None] * stride_am + kk[None, :] * stride_ak,
                    mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
        b = tl.load(b_base + kk[:, None] * stride_bk + rn[None, :] * stride_bn,
                    mask=(kk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(a, b, input_precision="tf32x3")
    acc += tl.load(bias_ptr + rn, mask=rn < N, other=0.0)[None, :]
    offs = batch * M * N + rm[:, None] * N + rn[None, :]
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    # fused epilogue
    v309 = 0.5 * acc * (1.0 + tl.erf(acc * 0.7071067811865476))  # gelu (line 35)
    v310 = v309  # dropout (line 36)
    tl.store(epi_v310_ptr + offs, v310, mask=mask)


def sk16_run(v307, layers_0_blocks_0_mlp_fc1_weight, layers_0_blocks_0_mlp_fc1_bias):
    # replaces: torch.nn.functional.linear (line 34)
    # replaces: torch.nn.functional.gelu (line 35), torch.nn.functional.dropout (line 36)
    a308 = v307.contiguous()
    b308 = layers_0_blocks_0_mlp_fc1_weight
    b1_308, sab1_308, sbb1_308 = 1, 0, 0
    k308 = a308.shape[-1]
    m308 = a308.numel() // max(k308, 1)
    batch308, sab308, sam308, sak308 = 1, 0, k308, 1
    n308 = b308.shape[0]
    sbb308, sbk308, sbn308 = 0, b308.stride(1), b308.stride(0)
    out308 = tuple(a308.shape[:-1]) + (n308,)
    if k308 != (b308.shape[1] if True else b308.shape[-2]):
        raise ValueError("matrix shapes do not match")
    v310 = torch.empty(out308, device=a308.device, dtype=torch.float32)
    if m308 * n308 * batch308 > 0:
        grid = (triton.cdiv(m308, 64) * triton.cdiv(n308, 64) * batch308,)
        sk16__gemm_linear_kernel1[grid](
            a308, b308, layers_0_blocks_0_mlp_fc1_bias, v310, out308[0], out308[1], out308[2], m308, n308, k308, sab308, sam308, sak308, sbb308, sbk308, sbn308,
            b1_308, sab1_308, sbb1_308,
            BLOCK_M=64, BLOCK_N=64, BLOCK_K=32, GROUP_M=8,
            IDX64=max(a308.untyped_storage().nbytes() // 4,
                      b308.untyped_storage().nbytes() // 4, batch308 * m308 * n308) >= 2**31,
            num_warps=4, num_stages=3)
    return v310


# ---- sk18 layer_norm_add_roll: triton_rows_b1024_w4 (builtin) ----
"""Subkernel layer_norm_add_roll (lines 52-293), builtin variant triton_rows_b1024_w4.

Generated by MKEvolve's builtin proposer; sizes are read from the tensors at run time.
"""


MK_USES_TORCH = ("roll", )


@triton.jit
def sk18__norm_rows_layer_norm_kernel1(v312_ptr, w_ptr, b_ptr, epi_v307_ptr, epi_v314_ptr, epi_D0, epi_D1, epi_D2, ROWS, M, RB: tl.constexpr, MB: tl.constexpr,
        IDX64: tl.constexpr):
    # replaces: torch.nn.functional.layer_norm (line 293)
    # layer_norm: RB whole rows per program in registers, one read of the input
    pid = tl.program_id(0)
    rr = tl.arange(0, RB)
    cc = tl.arange(0, MB)
    if IDX64:  # more than 2**31 elements: 64-bit addresses
        pid = pid.to(tl.int64)
        rr = rr.to(tl.int64)
        cc = cc.to(tl.int64)
    row = (pid * RB + rr)[:, None]
    r = cc[None, :]
    mask = (row < ROWS) & (r < M)
    offs = row * M + r
    x = tl.load(v312_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    x = tl.where(mask, x, 0.0)
    gmean = tl.sum(x, axis=1) / M
    d = tl.where(mask, x - gmean[:, None], 0.0)
    var = tl.sum(d * d, axis=1) / M
    rstd = 1.0 / tl.sqrt(var + 1e-05)
    y = d * rstd[:, None]
    ch = r
    y = y * tl.load(w_ptr + ch, mask=mask, other=1.0)
    y = y + tl.load(b_ptr + ch, mask=mask, other=0.0)
    # fused epilogue
    epi_v307 = tl.load(epi_v307_ptr + offs, mask=mask, other=0)
    v314 = epi_v307 + y  # add (line 293)
    tl.store(epi_v314_ptr + offs, v314, mask=mask)


def sk18_run(v312, layers_0_blocks_0_norm2_weight, layers_0_blocks_0_norm2_bias, v307):
    # replaces: torch.nn.functional.layer_norm (line 293)
    # replaces: torch.Tensor.add (line 293)
    in313 = v312.shape
    in313_device = v312.device
    numel313 = math.prod(in313)
    m313 = math.prod(in313[2:])
    rows313 = numel313 // max(m313, 1)
    lay313 = ()
    out313 = tuple(in313)
    v314 = torch.empty(out313, device=in313_device, dtype=torch.float32)
    if rows313 * m313 > 0:
        mb313 = triton.next_power_of_2(m313)
        if mb313 > 8192:
            raise ValueError("rows longer than the register tile of this variant")
        rb313 = max(1, 1024 // mb313)
        sk18__norm_rows_layer_norm_kernel1[(triton.cdiv(rows313, rb313),)](
            v312.contiguous(), layers_0_blocks_0_norm2_weight.contiguous(), layers_0_blocks_0_norm2_bias.contiguous(), v307.contiguous(), v314, out313[0], out313[1], out313[2], rows313, m313, *lay313, RB=rb313, MB=mb313, IDX64=numel313 >= 2**31,
            num_warps=max(4, min(16, rb313 * mb313 // 512)))  # <= 16 values/thread
    # replaces: torch.Tensor.view (line 265)
    v315 = v314.view(10, 56, 56, 96)
    # replaces: torch.roll (line 269)
    v316 = torch.roll(v315, shifts=(-3, -3), dims=(1, 2))
    # replaces: torch.Tensor.view (line 52)
    v317 = v316.view(10, 8, 7, 8, 7, 96)
    # replaces: torch.Tensor.permute (line 53)
    v318 = v317.permute(0, 1, 3, 2, 4, 5)
    # replaces: torch.Tensor.contiguous (line 53)
    v319 = v318.contiguous()
    # replaces: torch.Tensor.view (line 53)
    v320 = v319.view(-1, 7, 7, 96)
    # replaces: torch.Tensor.view (line 275)
    v321 = v320.view(-1, 49, 96)
    return v314, v321


# ---- sk32 linear_dropout_roll: triton_gemm128x128x32_w8_s3_tf32x3_b1024_w4 (builtin) ----
"""Subkernel linear_dropout_roll (lines 69-289), builtin variant triton_gemm128x128x32_w8_s3_tf32x3_b1024_w4.

Generated by MKEvolve's builtin proposer; sizes are read from the tensors at run time.
"""


MK_USES_TORCH = ("roll", )


@triton.jit
def sk32__gemm_linear_kernel1(a_ptr, b_ptr, bias_ptr, epi_v364_ptr, epi_D0, epi_D1, epi_D2, M, N, K, stride_ab, stride_am, stride_ak,
        stride_bb, stride_bk, stride_bn, B1, stride_ab1, stride_bb1,
        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
        BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, IDX64: tl.constexpr):
    # replaces: torch.nn.functional.linear (line 184)
    # grouped program order: GROUP_M row tiles share each column tile in L2;
    # batches on the same grid axis (dim 1 of a grid allows only 65535)
    pid = tl.program_id(0)
    num_m = tl.cdiv(M, BLOCK_M)
    num_n = tl.cdiv(N, BLOCK_N)
    batch = pid // (num_m * num_n)
    pid = pid % (num_m * num_n)
    group = pid // (GROUP_M * num_n)
    first_m = group * GROUP_M
    group_size = tl.minimum(num_m - first_m, GROUP_M)
    pid_m = first_m + (pid % group_size)
    pid_n = (pid % (GROUP_M * num_n)) // group_size
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    if IDX64:  # an operand's storage or the result has more than 2**31 elements
        batch = batch.to(tl.int64)
        rm = rm.to(tl.int64)
        rn = rn.to(tl.int64)
        rk = rk.to(tl.int64)
    # a second batch dim (4-d: heads) of B1, each operand by its own strides
    b0 = batch // B1
    b1 = batch % B1
    a_base = a_ptr + b0 * stride_ab + b1 * stride_ab1
    b_base = b_ptr + b0 * stride_bb + b1 * stride_bb1
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        kk = k0 + rk
        a = tl.load(a_base + rm[:, None] * stride_am + kk[None, :] * stride_ak,
                    mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
        b = tl.load(b_base + kk[:, None] * stride_bk + rn[None, :] * stride_bn,
                    mask=(kk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(a, b, input_precision="tf32x3")
    acc += tl.load(bias_ptr + rn, mask=rn < N, other=0.0)[None, :]
    offs = batch * M * N + rm[:, None] * N + rn[None, :]
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    # fused epilogue
    v364 = acc  # dropout (line 185)
    tl.store(epi_v364_ptr + offs, v364, mask=mask)


def sk32_run(v362, layers_0_blocks_1_attn_proj_weight, layers_0_blocks_1_attn_proj_bias):
    # replaces: torch.nn.functional.linear (line 184)
    # replaces: torch.nn.functional.dropout (line 185)
    a363 = v362.contiguous()
    b363 = layers_0_blocks_1_attn_proj_weight
    b1_363, sab1_363, sbb1_363 = 1, 0, 0
    k363 = a363.shape[-1]
    m363 = a363.numel() // max(k363, 1)
    batch363, sab363, sam363, sak363 = 1, 0, k363, 1
    n363 = b363.shape[0]
    sbb363, sbk363, sbn363 = 0, b363.stride(1), b363.stride(0)
    out363 = tuple(a363.shape[:-1]) + (n363,)
    if k363 != (b363.shape[1] if True else b363.shape[-2]):
        raise ValueError("matrix shapes do not match")
    v364 = torch.empty(out363, device=a363.device, dtype=torch.float32)
    if m363 * n363 * batch363 > 0:
        grid = (triton.cdiv(m363, 128) * triton.cdiv(n363, 128) * batch363,)
        sk32__gemm_linear_kernel1[grid](
            a363, b363, layers_0_blocks_1_attn_proj_bias, v364, out363[0], out363[1], out363[2], m363, n363, k363, sab363, sam363, sak363, sbb363, sbk363, sbn363,
            b1_363, sab1_363, sbb1_363,
            BLOCK_M=128, BLOCK_N=128, BLOCK_K=32, GROUP_M=8,
            IDX64=max(a363.untyped_storage().nbytes() // 4,
                      b363.untyped_storage().nbytes() // 4, batch363 * m363 * n363) >= 2**31,
            num_warps=8, num_stages=3)
    # replaces: torch.Tensor.view (line 281)
    v365 = v364.view(-1, 7, 7, 96)
    # replaces: torch.Tensor.view (line 69)
    v366 = v365.view(10, 8, 8, 7, 7, -1)
    # replaces: torch.Tensor.permute (line 70)
    v367 = v366.permute(0, 1, 3, 2, 4, 5)
    # replaces: torch.Tensor.contiguous (line 70)
    v368 = v367.contiguous()
    # replaces: torch.Tensor.view (line 70)
    v369 = v368.view(10, 56, 56, -1)
    # replaces: torch.roll (line 286)
    v370 = torch.roll(v369, shifts=(3, 3), dims=(1, 2))
    # replaces: torch.Tensor.view (line 289)
    v371 = v370.view(10, 3136, 96)
    return v371


# ---- sk36 layer_norm_add_cat: triton_b1024_w4 (builtin) ----
"""Subkernel layer_norm_add_cat (lines 293-330), builtin variant triton_b1024_w4.

Generated by MKEvolve's builtin proposer; sizes are read from the tensors at run time.
"""


MK_USES_TORCH = ("cat", )


@triton.jit
def sk36__norm_layer_norm_kernel1(v378_ptr, w_ptr, b_ptr, epi_v373_ptr, epi_v380_ptr, epi_D0, epi_D1, epi_D2, M, BLOCK: tl.constexpr, IDX64: tl.constexpr):
    # replaces: torch.nn.functional.layer_norm (line 293)
    # one program per layer_norm row: statistics pass, then normalise + store
    pid = tl.program_id(0)
    lanes = tl.arange(0, BLOCK)
    if IDX64:  # more than 2**31 elements: 64-bit addresses
        pid = pid.to(tl.int64)
        lanes = lanes.to(tl.int64)
    row = pid
    cnt = tl.zeros([BLOCK], dtype=tl.float32)
    mean = tl.zeros([BLOCK], dtype=tl.float32)
    m2 = tl.zeros([BLOCK], dtype=tl.float32)
    for r0 in range(0, M, BLOCK):
        r = r0 + lanes
        mask = r < M
        offs = row * M + r
        x = tl.load(v378_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        cnt += tl.where(mask, 1.0, 0.0)
        delta = tl.where(mask, x - mean, 0.0)
        mean += delta / tl.maximum(cnt, 1.0)
        m2 += delta * tl.where(mask, x - mean, 0.0)
    tot = tl.sum(cnt, axis=0)
    gmean = tl.sum(cnt * mean, axis=0) / tot
    dm = tl.where(cnt > 0, mean - gmean, 0.0)
    var = tl.sum(m2 + cnt * dm * dm, axis=0) / tot
    rstd = 1.0 / tl.sqrt(var + 1e-05)
    for r0 in range(0, M, BLOCK):
        r = r0 + lanes
        mask = r < M
        offs = row * M + r
        x = tl.load(v378_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        y = (x - gmean) * rstd
        ch = r
        y = y * tl.load(w_ptr + ch, mask=mask, other=1.0)
        y = y + tl.load(b_ptr + ch, mask=mask, other=0.0)
        # fused epilogue
        epi_v373 = tl.load(epi_v373_ptr + offs, mask=mask, other=0)
        v380 = epi_v373 + y  # add (line 293)
        tl.store(epi_v380_ptr + offs, v380, mask=mask)


def sk36_run(v378, layers_0_blocks_1_norm2_weight, layers_0_blocks_1_norm2_bias, v373):
    # replaces: torch.nn.functional.layer_norm (line 293)
    # replaces: torch.Tensor.add (line 293)
    in379 = v378.shape
    in379_device = v378.device
    numel379 = math.prod(in379)
    m379 = math.prod(in379[2:])
    rows379 = numel379 // max(m379, 1)
    lay379 = ()
    out379 = tuple(in379)
    v380 = torch.empty(out379, device=in379_device, dtype=torch.float32)
    if rows379 * m379 > 0:
        sk36__norm_layer_norm_kernel1[(rows379,)](
            v378.contiguous(), layers_0_blocks_1_norm2_weight.contiguous(), layers_0_blocks_1_norm2_bias.contiguous(), v373.contiguous(), v380, out379[0], out379[1], out379[2], m379, *lay379, BLOCK=1024, IDX64=numel379 >= 2**31, num_warps=4)
    # replaces: torch.Tensor.view (line 323)
    v381 = v380.view(10, 56, 56, 96)
    # replaces: torch.Tensor.__getitem__ (line 325)
    v382 = torch.Tensor.__getitem__(v381, (slice(None, None, None), slice(0, None, 2), slice(0, None, 2), slice(None, None, None)))
    # replaces: torch.Tensor.__getitem__ (line 326)
    v383 = torch.Tensor.__getitem__(v381, (slice(None, None, None), slice(1, None, 2), slice(0, None, 2), slice(None, None, None)))
    # replaces: torch.Tensor.__getitem__ (line 327)
    v384 = torch.Tensor.__getitem__(v381, (slice(None, None, None), slice(0, None, 2), slice(1, None, 2), slice(None, None, None)))
    # replaces: torch.Tensor.__getitem__ (line 328)
    v385 = torch.Tensor.__getitem__(v381, (slice(None, None, None), slice(1, None, 2), slice(1, None, 2), slice(None, None, None)))
    # replaces: torch.cat (line 329)
    v386 = torch.cat([v382, v383, v384, v385], -1)
    # replaces: torch.Tensor.view (line 330)
    v387 = v386.view(10, -1, 384)
    return v387


# ---- sk38 layer_norm: triton_b1024_w4 (builtin) ----
"""Subkernel layer_norm (lines 52-333), builtin variant triton_b1024_w4.

Generated by MKEvolve's builtin proposer; sizes are read from the tensors at run time.
"""



@triton.jit
def sk38__norm_layer_norm_kernel1(v388_ptr, w_ptr, b_ptr, v389_ptr, M, BLOCK: tl.constexpr, IDX64: tl.constexpr):
    # replaces: torch.nn.functional.layer_norm (line 333)
    # one program per layer_norm row: statistics pass, then normalise + store
    pid = tl.program_id(0)
    lanes = tl.arange(0, BLOCK)
    if IDX64:  # more than 2**31 elements: 64-bit addresses
        pid = pid.to(tl.int64)
        lanes = lanes.to(tl.int64)
    row = pid
    cnt = tl.zeros([BLOCK], dtype=tl.float32)
    mean = tl.zeros([BLOCK], dtype=tl.float32)
    m2 = tl.zeros([BLOCK], dtype=tl.float32)
    for r0 in range(0, M, BLOCK):
        r = r0 + lanes
        mask = r < M
        offs = row * M + r
        x = tl.load(v388_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        cnt += tl.where(mask, 1.0, 0.0)
        delta = tl.where(mask, x - mean, 0.0)
        mean += delta / tl.maximum(cnt, 1.0)
        m2 += delta * tl.where(mask, x - mean, 0.0)
    tot = tl.sum(cnt, axis=0)
    gmean = tl.sum(cnt * mean, axis=0) / tot
    dm = tl.where(cnt > 0, mean - gmean, 0.0)
    var = tl.sum(m2 + cnt * dm * dm, axis=0) / tot
    rstd = 1.0 / tl.sqrt(var + 1e-05)
    for r0 in range(0, M, BLOCK):
        r = r0 + lanes
        mask = r < M
        offs = row * M + r
        x = tl.load(v388_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        y = (x - gmean) * rstd
        ch = r
        y = y * tl.load(w_ptr + ch, mask=mask, other=1.0)
        y = y + tl.load(b_ptr + ch, mask=mask, other=0.0)
        tl.store(v389_ptr + offs, y, mask=mask)


def sk38_run(v388, layers_0_downsample_norm_weight, layers_0_downsample_norm_bias):
    # replaces: torch.nn.functional.layer_norm (line 333)
    in389 = v388.shape
    in389_device = v388.device
    numel389 = math.prod(in389)
    m389 = math.prod(in389[2:])
    rows389 = numel389 // max(m389, 1)
    lay389 = ()
    out389 = tuple(in389)
    v389 = torch.empty(out389, device=in389_device, dtype=torch.float32)
    if rows389 * m389 > 0:
        sk38__norm_layer_norm_kernel1[(rows389,)](
            v388.contiguous(), layers_0_downsample_norm_weight.contiguous(), layers_0_downsample_norm_bias.contiguous(), v389, m389, *lay389, BLOCK=1024, IDX64=numel389 >= 2**31, num_warps=4)
    # replaces: torch.Tensor.view (line 265)
    v390 = v389.view(10, 28, 28, 192)
    # replaces: torch.Tensor.view (line 52)
    v391 = v390.view(10, 4, 7, 4, 7, 192)
    # replaces: torch.Tensor.permute (line 53)
    v392 = v391.permute(0, 1, 3, 2, 4, 5)
    # replaces: torch.Tensor.contiguous (line 53)
    v393 = v392.contiguous()
    # replaces: torch.Tensor.view (line 53)
    v394 = v393.view(-1, 7, 7, 192)
    # replaces: torch.Tensor.view (line 275)
    v395 = v394.view(-1, 49, 192)
    return v389, v395


# ---- sk40 linear_6: triton_gemm64x64x32_w4_s3_tf32x3 (builtin) ----
"""Subkernel linear_6 (lines 157-159), builtin variant triton_gemm64x64x32_w4_s3_tf32x3.

Generated by MKEvolve's builtin proposer; sizes are read from the tensors at run time.
"""



@triton.jit
def sk40__gemm_linear_kernel1(a_ptr, b_ptr, bias_ptr, v398_ptr, M, N, K, stride_ab, stride_am, stride_ak,
        stride_bb, stride_bk, stride_bn, B1, stride_ab1, stride_bb1,
        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
        BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, IDX64: tl.constexpr):
    # replaces: torch.nn.functional.linear (line 157)
    # grouped program order: GROUP_M row tiles share each column tile in L2;
    # batches on the same grid axis (dim 1 of a grid allows only 65535)
    pid = tl.program_id(0)
    num_m = tl.cdiv(M, BLOCK_M)
    num_n = tl.cdiv(N, BLOCK_N)
    batch = pid // (num_m * num_n)
    pid = pid % (num_m * num_n)
    group = pid // (GROUP_M * num_n)
    first_m = group * GROUP_M
    group_size = tl.minimum(num_m - first_m, GROUP_M)
    pid_m = first_m + (pid % group_size)
    pid_n = (pid % (GROUP_M * num_n)) // group_size
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    if IDX64:  # an operand's storage or the result has more than 2**31 elements
        batch = batch.to(tl.int64)
        rm = rm.to(tl.int64)
        rn = rn.to(tl.int64)
        rk = rk.to(tl.int64)
    # a second batch dim (4-d: heads) of B1, each operand by its own strides
    b0 = batch // B1
    b1 = batch % B1
    a_base = a_ptr + b0 * stride_ab + b1 * stride_ab1
    b_base = b_ptr + b0 * stride_bb + b1 * stride_bb1
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        kk = k0 + rk
        a = tl.load(a_base + rm[:, None] * stride_am + kk[None, :] * stride_ak,
                    mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
        b = tl.load(b_base + kk[:, None] * stride_bk + rn[None, :] * stride_bn,
                    mask=(kk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(a, b, input_precision="tf32x3")
    acc += tl.load(bias_ptr + rn, mask=rn < N, other=0.0)[None, :]
    offs = batch * M * N + rm[:, None] * N + rn[None, :]
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    tl.store(v398_ptr + offs, acc, mask=mask)


def sk40_run(v395, layers_1_blocks_0_attn_qkv_weight, v397):
    # replaces: torch.nn.functional.linear (line 157)
    a398 = v395.contiguous()
    b398 = layers_1_blocks_0_attn_qkv_weight
    b1_398, sab1_398, sbb1_398 = 1, 0, 0
    k398 = a398.shape[-1]
    m398 = a398.numel() // max(k398, 1)
    batch398, sab398, sam398, sak398 = 1, 0, k398, 1
    n398 = b398.shape[0]
    sbb398, sbk398, sbn398 = 0, b398.stride(1), b398.stride(0)
    out398 = tuple(a398.shape[:-1]) + (n398,)
    if k398 != (b398.shape[1] if True else b398.shape[-2]):
        raise ValueError("matrix shapes do not match")
    v398 = torch.empty(out398, device=a398.device, dtype=torch.float32)
    if m398 * n398 * batch398 > 0:
        grid = (triton.cdiv(m398, 64) * triton.cdiv(n398, 64) * batch398,)
        sk40__gemm_linear_kernel1[grid](
            a398, b398, v397, v398, m398, n398, k398, sab398, sam398, sak398, sbb398, sbk398, sbn398,
            b1_398, sab1_398, sbb1_398,
            BLOCK_M=64, BLOCK_N=64, BLOCK_K=32, GROUP_M=8,
            IDX64=max(a398.untyped_storage().nbytes() // 4,
                      b398.untyped_storage().nbytes() // 4, batch398 * m398 * n398) >= 2**31,
            num_warps=4, num_stages=3)
    # replaces: torch.Tensor.reshape (line 158)
    v399 = v398.reshape(160, 49, 3, 6, -1)
    # replaces: torch.Tensor.permute (line 158)
    v400 = v399.permute(2, 0, 3, 1, 4)
    # replaces: torch.Tensor.__getitem__ (line 159)
    v401 = torch.Tensor.__getitem__(v400, 0)
    # replaces: torch.Tensor.__getitem__ (line 159)
    v402 = torch.Tensor.__getitem__(v400, 1)
    # replaces: torch.Tensor.__getitem__ (line 159)
    v403 = torch.Tensor.__getitem__(v400, 2)
    return v401, v402, v403


# ---- sk43 matmul_5: triton_gemm64x64x32_w4_s3_tf32x3 (builtin) ----
"""Subkernel matmul_5 (lines 162-162), builtin variant triton_gemm64x64x32_w4_s3_tf32x3.

Generated by MKEvolve's builtin proposer; sizes are read from the tensors at run time.
"""



@triton.jit
def sk43__gemm_matmul_kernel1(a_ptr, b_ptr, v407_ptr, M, N, K, stride_ab, stride_am, stride_ak,
        stride_bb, stride_bk, stride_bn, B1, stride_ab1, stride_bb1,
        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
        BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, IDX64: tl.constexpr):
    # replaces: torch.Tensor.matmul (line 162)
    # grouped program order: GROUP_M row tiles share each column tile in L2;
    # batches on the same grid axis (dim 1 of a grid allows only 65535)
    pid = tl.program_id(0)
    num_m = tl.cdiv(M, BLOCK_M)
    num_n = tl.cdiv(N, BLOCK_N)
    batch = pid // (num_m * num_n)
    pid = pid % (num_m * num_n)
    group = pid // (GROUP_M * num_n)
    first_m = group * GROUP_M
    group_size = tl.minimum(num_m - first_m, GROUP_M)
    pid_m = first_m + (pid % group_size)
    pid_n = (pid % (GROUP_M * num_n)) // group_size
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    if IDX64:  # an operand's storage or the result has more than 2**31 elements
        batch = batch.to(tl.int64)
        rm = rm.to(tl.int64)
        rn = rn.to(tl.int64)
        rk = rk.to(tl.int64)
    # a second batch dim (4-d: heads) of B1, each operand by its own strides
    b0 = batch // B1
    b1 = batch % B1
    a_base = a_ptr + b0 * stride_ab + b1 * stride_ab1
    b_base = b_ptr + b0 * stride_bb + b1 * stride_bb1
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        kk = k0 + rk
        a = tl.load(a_base + rm[:, None] * stride_am + kk[None, :] * stride_ak,
                    mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
        b = tl.load(b_base + kk[:, None] * stride_bk + rn[None, :] * stride_bn,
                    mask=(kk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(a, b, input_precision="tf32x3")
    offs = batch * M * N + rm[:, None] * N + rn[None, :]
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    tl.store(v407_ptr + offs, acc, mask=mask)


def sk43_run(v404, v406):
    # replaces: torch.Tensor.matmul (line 162)
    a407 = v404
    b407 = v406
    bat407, b1_407, m407, k407 = a407.shape
    if tuple(b407.shape[:2]) != (bat407, b1_407):
        raise ValueError("batch dims do not match")
    n407 = b407.shape[3]
    batch407 = bat407 * b1_407
    sab407, sab1_407, sam407, sak407 = a407.stride()
    sbb407, sbb1_407, sbk407, sbn407 = b407.stride()
    out407 = (bat407, b1_407, m407, n407)
    if k407 != (b407.shape[0] if False else b407.shape[-2]):
        raise ValueError("matrix shapes do not match")
    v407 = torch.empty(out407, device=a407.device, dtype=torch.float32)
    if m407 * n407 * batch407 > 0:
        grid = (triton.cdiv(m407, 64) * triton.cdiv(n407, 64) * batch407,)
        sk43__gemm_matmul_kernel1[grid](
            a407, b407, v407, m407, n407, k407, sab407, sam407, sak407, sbb407, sbk407, sbn407,
            b1_407, sab1_407, sbb1_407,
            BLOCK_M=64, BLOCK_N=64, BLOCK_K=32, GROUP_M=8,
            IDX64=max(a407.untyped_storage().nbytes() // 4,
                      b407.untyped_storage().nbytes() // 4, batch407 * m407 * n407) >= 2**31,
            num_warps=4, num_stages=3)
    return v407


# ---- sk51 linear_dropout_4: triton_gemm128x128x32_w8_s3_tf32x3_b1024_w4 (builtin) ----
"""Subkernel linear_dropout_4 (lines 69-289), builtin variant triton_gemm128x128x32_w8_s3_tf32x3_b1024_w4.

Generated by MKEvolve's builtin proposer; sizes are read from the tensors at run time.
"""



@triton.jit
def sk51__gemm_linear_kernel1(a_ptr, b_ptr, bias_ptr, epi_v433_ptr, epi_D0, epi_D1, epi_D2, M, N, K, stride_ab, stride_am, stride_ak,
        stride_bb, stride_bk, stride_bn, B1, stride_ab1, stride_bb1,
        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
        BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, IDX64: tl.constexpr):
    # replaces: torch.nn.functional.linear (line 184)
    # grouped program order: GROUP_M row tiles share each column tile in L2;
    # batches on the same grid axis (dim 1 of a grid allows only 65535)
    pid = tl.program_id(0)
    num_m = tl.cdiv(M, BLOCK_M)
    num_n = tl.cdiv(N, BLOCK_N)
    batch = pid // (num_m * num_n)
    pid = pid % (num_m * num_n)
    group = pid // (GROUP_M * num_n)
    first_m = group * GROUP_M
    group_size = tl.minimum(num_m - first_m, GROUP_M)
    pid_m = first_m + (pid % group_size)
    pid_n = (pid % (GROUP_M * num_n)) // group_size
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    if IDX64:  # an operand's storage or the result has more than 2**31 elements
        batch = batch.to(tl.int64)
        rm = rm.to(tl.int64)
        rn = rn.to(tl.int64)
        rk = rk.to(tl.int64)
    # a second batch dim (4-d: heads) of B1, each operand by its own strides
    b0 = batch // B1
    b1 = batch % B1
    a_base = a_ptr + b0 * stride_ab + b1 * stride_ab1
    b_base = b_ptr + b0 * stride_bb + b1 * stride_bb1
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        kk = k0 + rk
        a = tl.load(a_base + rm[:, None] * stride_am + kk[None, :] * stride_ak,
                    mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
        b = tl.load(b_base + kk[:, None] * stride_bk + rn[None, :] * stride_bn,
                    mask=(kk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(a, b, input_precision="tf32x3")
    acc += tl.load(bias_ptr + rn, mask=rn < N, other=0.0)[None, :]
    offs = batch * M * N + rm[:, None] * N + rn[None, :]
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    # fused epilogue
    v433 = acc  # dropout (line 185)
    tl.store(epi_v433_ptr + offs, v433, mask=mask)


def sk51_run(v431, layers_1_blocks_0_attn_proj_weight, layers_1_blocks_0_attn_proj_bias):
    # replaces: torch.nn.functional.linear (line 184)
    # replaces: torch.nn.functional.dropout (line 185)
    a432 = v431.contiguous()
    b432 = layers_1_blocks_0_attn_proj_weight
    b1_432, sab1_432, sbb1_432 = 1, 0, 0
    k432 = a432.shape[-1]
    m432 = a432.numel() // max(k432, 1)
    batch432, sab432, sam432, sak432 = 1, 0, k432, 1
    n432 = b432.shape[0]
    sbb432, sbk432, sbn432 = 0, b432.stride(1), b432.stride(0)
    out432 = tuple(a432.shape[:-1]) + (n432,)
    if k432 != (b432.shape[1] if True else b432.shape[-2]):
        raise ValueError("matrix shapes do not match")
    v433 = torch.empty(out432, device=a432.device, dtype=torch.float32)
    if m432 * n432 * batch432 > 0:
        grid = (triton.cdiv(m432, 128) * triton.cdiv(n432, 128) * batch432,)
        sk51__gemm_linear_kernel1[grid](
            a432, b432, layers_1_blocks_0_attn_proj_bias, v433, out432[0], out432[1], out432[2], m432, n432, k432, sab432, sam432, sak432, sbb432, sbk432, sbn432,
            b1_432, sab1_432, sbb1_432,
            BLOCK_M=128, BLOCK_N=128, BLOCK_K=32, GROUP_M=8,
            IDX64=max(a432.untyped_storage().nbytes() // 4,
                      b432.untyped_storage().nbytes() // 4, batch432 * m432 * n432) >= 2**31,
            num_warps=8, num_stages=3)
    # replaces: torch.Tensor.view (line 281)
    v434 = v433.view(-1, 7, 7, 192)
    # replaces: torch.Tensor.view (line 69)
    v435 = v434.view(10, 4, 4, 7, 7, -1)
    # replaces: torch.Tensor.permute (line 70)
    v436 = v435.permute(0, 1, 3, 2, 4, 5)
    # replaces: torch.Tensor.contiguous (line 70)
    v437 = v436.contiguous()
    # replaces: torch.Tensor.view (line 70)
    v438 = v437.view(10, 28, 28, -1)
    # replaces: torch.Tensor.view (line 289)
    v439 = v438.view(10, 784, 192)
    return v439


# ---- sk53 linear_gelu_dropout_3: triton_gemm128x128x32_w8_s3_tf32x3_b1024_w4 (builtin) ----
"""Subkernel linear_gelu_dropout_3 (lines 34-36), builtin variant triton_gemm128x128x32_w8_s3_tf32x3_b1024_w4.

Generated by MKEvolve's builtin proposer; sizes are read from the tensors at run time.
"""



@triton.jit
def sk53__gemm_linear_kernel1(a_ptr, b_ptr, bias_ptr, epi_v444_ptr, epi_D0, epi_D1, epi_D2, M, N, K, stride_ab, stride_am, stride_ak,
        stride_bb, stride_bk, stride_bn, B1, stride_ab1, stride_bb1,
        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
        BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, IDX64: tl.constexpr):
    # replaces: torch.nn.functional.linear (line 34)
    # grouped program order: GROUP_M row tiles share each column tile in L2;
    # batches on the same grid axis (dim 1 of a grid allows only 65535)
    pid = tl.program_id(0)
    num_m = tl.cdiv(M, BLOCK_M)
    num_n = tl.cdiv(N, BLOCK_N)
    batch = pid // (num_m * num_n)
    pid = pid % (num_m * num_n)
    group = pid // (GROUP_M * num_n)
    first_m = group * GROUP_M
    group_size = tl.minimum(num_m - first_m, GROUP_M)
    pid_m = first_m + (pid % group_size)
    pid_n = (pid % (GROUP_M * num_n)) // group_size
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    if IDX64:  # an operand's storage or the result has more than 2**31 elements
        batch = batch.to(tl.int64)
        rm = rm.to(tl.int64)
        rn = rn.to(tl.int64)
        rk = rk.to(tl.int64)
    # a second batch dim (4-d: heads) of B1, each operand by its own strides
    b0 = batch // B1
    b1 = batch % B1
    a_base = a_ptr + b0 * stride_ab + b1 * stride_ab1
    b_base = b_ptr + b0 * stride_bb + b1 * stride_bb1
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        kk = k0 + rk
        a = tl.load(a_base + rm[:, None] * stride_am + kk[None, :] * stride_ak,
                    mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
        b = tl.load(b_base + kk[:, None] * stride_bk + rn[None, :] * stride_bn,
                    mask=(kk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(a, b, input_precision="tf32x3")
    acc += tl.load(bias_ptr + rn, mask=rn < N, other=0.0)[None, :]
    offs = batch * M * N + rm[:, None] * N + rn[None, :]
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    # fused epilogue
    v443 = 0.5 * acc * (1.0 + tl.erf(acc * 0.7071067811865476))  # gelu (line 35)
    v444 = v443  # dropout (line 36)
    tl.store(epi_v444_ptr + offs, v444, mask=mask)


def sk53_run(v441, layers_1_blocks_0_mlp_fc1_weight, layers_1_blocks_0_mlp_fc1_bias):
    # replaces: torch.nn.functional.linear (line 34)
    # replaces: torch.nn.functional.gelu (line 35), torch.nn.functional.dropout (line 36)
    a442 = v441.contiguous()
    b442 = layers_1_blocks_0_mlp_fc1_weight
    b1_442, sab1_442, sbb1_442 = 1, 0, 0
    k442 = a442.shape[-1]
    m442 = a442.numel() // max(k442, 1)
    batch442, sab442, sam442, sak442 = 1, 0, k442, 1
    n442 = b442.shape[0]
    sbb442, sbk442, sbn442 = 0, b442.stride(1), b442.stride(0)
    out442 = tuple(a442.shape[:-1]) + (n442,)
    if k442 != (b442.shape[1] if True else b442.shape[-2]):
        raise ValueError("matrix shapes do not match")
    v444 = torch.empty(out442, device=a442.device, dtype=torch.float32)
    if m442 * n442 * batch442 > 0:
        grid = (triton.cdiv(m442, 128) * triton.cdiv(n442, 128) * batch442,)
        sk53__gemm_linear_kernel1[grid](
            a442, b442, layers_1_blocks_0_mlp_fc1_bias, v444, out442[0], out442[1], out442[2], m442, n442, k442, sab442, sam442, sak442, sbb442, sbk442, sbn442,
            b1_442, sab1_442, sbb1_442,
            BLOCK_M=128, BLOCK_N=128, BLOCK_K=32, GROUP_M=8,
            IDX64=max(a442.untyped_storage().nbytes() // 4,
                      b442.untyped_storage().nbytes() // 4, batch442 * m442 * n442) >= 2**31,
            num_warps=8, num_stages=3)
    return v444


# ---- sk54 linear_dropout_5: triton_gemm64x64x32_w4_s3_tf32x3_b1024_w4 (builtin) ----
"""Subkernel linear_dropout_5 (lines 37-38), builtin variant triton_gemm64x64x32_w4_s3_tf32x3_b1024_w4.

Generated by MKEvolve's builtin proposer; sizes are read from the tensors at run time.
"""



@triton.jit
def sk54__gemm_linear_kernel1(a_ptr, b_ptr, bias_ptr, epi_v446_ptr, epi_D0, epi_D1, epi_D2, M, N, K, stride_ab, stride_am, stride_ak,
        stride_bb, stride_bk, stride_bn, B1, stride_ab1, stride_bb1,
        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
        BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, IDX64: tl.constexpr):
    # replaces: torch.nn.functional.linear (line 37)
    # grouped program order: GROUP_M row tiles share each column tile in L2;
    # batches on the same grid axis (dim 1 of a grid allows only 65535)
    pid = tl.program_id(0)
    num_m = tl.cdiv(M, BLOCK_M)
    num_n = tl.cdiv(N, BLOCK_N)
    batch = pid // (num_m * num_n)
    pid = pid % (num_m * num_n)
    group = pid // (GROUP_M * num_n)
    first_m = group * GROUP_M
    group_size = tl.minimum(num_m - first_m, GROUP_M)
    pid_m = first_m + (pid % group_size)
    pid_n = (pid % (GROUP_M * num_n)) // group_size
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    if IDX64:  # an operand's storage or the result has more than 2**31 elements
        batch = batch.to(tl.int64)
        rm = rm.to(tl.int64)
        rn = rn.to(tl.int64)
        rk = rk.to(tl.int64)
    # a second batch dim (4-d: heads) of B1, each operand by its own strides
    b0 = batch // B1
    b1 = batch % B1
    a_base = a_ptr + b0 * stride_ab + b1 * stride_ab1
    b_base = b_ptr + b0 * stride_bb + b1 * stride_bb1
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        kk = k0 + rk
        a = tl.load(a_base + rm[:, None] * stride_am + kk[None, :] * stride_ak,
                    mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
        b = tl.load(b_base + kk[:, None] * stride_bk + rn[None, :] * stride_bn,
                    mask=(kk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(a, b, input_precision="tf32x3")
    acc += tl.load(bias_ptr + rn, mask=rn < N, other=0.0)[None, :]
    offs = batch * M * N + rm[:, None] * N + rn[None, :]
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    # fused epilogue
    v446 = acc  # dropout (line 38)
    tl.store(epi_v446_ptr + offs, v446, mask=mask)


def sk54_run(v444, layers_1_blocks_0_mlp_fc2_weight, layers_1_blocks_0_mlp_fc2_bias):
    # replaces: torch.nn.functional.linear (line 37)
    # replaces: torch.nn.functional.dropout (line 38)
    a445 = v444.contiguous()
    b445 = layers_1_blocks_0_mlp_fc2_weight
    b1_445, sab1_445, sbb1_445 = 1, 0, 0
    k445 = a445.shape[-1]
    m445 = a445.numel() // max(k445, 1)
    batch445, sab445, sam445, sak445 = 1, 0, k445, 1
    n445 = b445.shape[0]
    sbb445, sbk445, sbn445 = 0, b445.stride(1), b445.stride(0)
    out445 = tuple(a445.shape[:-1]) + (n445,)
    if k445 != (b445.shape[1] if True else b445.shape[-2]):
        raise ValueError("matrix shapes do not match")
    v446 = torch.empty(out445, device=a445.device, dtype=torch.float32)
    if m445 * n445 * batch445 > 0:
        grid = (triton.cdiv(m445, 64) * triton.cdiv(n445, 64) * batch445,)
        sk54__gemm_linear_kernel1[grid](
            a445, b445, layers_1_blocks_0_mlp_fc2_bias, v446, out445[0], out445[1], out445[2], m445, n445, k445, sab445, sam445, sak445, sbb445, sbk445, sbn445,
            b1_445, sab1_445, sbb1_445,
            BLOCK_M=64, BLOCK_N=64, BLOCK_K=32, GROUP_M=8,
            IDX64=max(a445.untyped_storage().nbytes() // 4,
                      b445.untyped_storage().nbytes() // 4, batch445 * m445 * n445) >= 2**31,
            num_warps=4, num_stages=3)
    return v446


# ---- sk55 layer_norm_add_roll_2: triton_b1024_w4 (builtin) ----
"""Subkernel layer_norm_add_roll_2 (lines 52-293), builtin variant triton_b1024_w4.

Generated by MKEvolve's builtin proposer; sizes are read from the tensors at run time.
"""


MK_USES_TORCH = ("roll", )


@triton.jit
def sk55__norm_layer_norm_kernel1(v446_ptr, w_ptr, b_ptr, epi_v441_ptr, epi_v448_ptr, epi_D0, epi_D1, epi_D2, M, BLOCK: tl.constexpr, IDX64: tl.constexpr):
    # replaces: torch.nn.functional.layer_norm (line 293)
    # one program per layer_norm row: statistics pass, then normalise + store
    pid = tl.program_id(0)
    lanes = tl.arange(0, BLOCK)
    if IDX64:  # more than 2**31 elements: 64-bit addresses
        pid = pid.to(tl.int64)
        lanes = lanes.to(tl.int64)
    row = pid
    cnt = tl.zeros([BLOCK], dtype=tl.float32)
    mean = tl.zeros([BLOCK], dtype=tl.float32)
    m2 = tl.zeros([BLOCK], dtype=tl.float32)
    for r0 in range(0, M, BLOCK):
        r = r0 + lanes
        mask = r < M
        offs = row * M + r
        x = tl.load(v446_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        cnt += tl.where(mask, 1.0, 0.0)
        delta = tl.where(mask, x - mean, 0.0)
        mean += delta / tl.maximum(cnt, 1.0)
        m2 += delta * tl.where(mask, x - mean, 0.0)
    tot = tl.sum(cnt, axis=0)
    gmean = tl.sum(cnt * mean, axis=0) / tot
    dm = tl.where(cnt > 0, mean - gmean, 0.0)
    var = tl.sum(m2 + cnt * dm * dm, axis=0) / tot
    rstd = 1.0 / tl.sqrt(var + 1e-05)
    for r0 in range(0, M, BLOCK):
        r = r0 + lanes
        mask = r < M
        offs = row * M + r
        x = tl.load(v446_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        y = (x - gmean) * rstd
        ch = r
        y = y * tl.load(w_ptr + ch, mask=mask, other=1.0)
        y = y + tl.load(b_ptr + ch, mask=mask, other=0.0)
        # fused epilogue
        epi_v441 = tl.load(epi_v441_ptr + offs, mask=mask, other=0)
        v448 = epi_v441 + y  # add (line 293)
        tl.store(epi_v448_ptr + offs, v448, mask=mask)


def sk55_run(v446, layers_1_blocks_0_norm2_weight, layers_1_blocks_0_norm2_bias, v441):
    # replaces: torch.nn.functional.layer_norm (line 293)
    # replaces: torch.Tensor.add (line 293)
    in447 = v446.shape
    in447_device = v446.device
    numel447 = math.prod(in447)
    m447 = math.prod(in447[2:])
    rows447 = numel447 // max(m447, 1)
    lay447 = ()
    out447 = tuple(in447)
    v448 = torch.empty(out447, device=in447_device, dtype=torch.float32)
    if rows447 * m447 > 0:
        sk55__norm_layer_norm_kernel1[(rows447,)](
            v446.contiguous(), layers_1_blocks_0_norm2_weight.contiguous(), layers_1_blocks_0_norm2_bias.contiguous(), v441.contiguous(), v448, out447[0], out447[1], out447[2], m447, *lay447, BLOCK=1024, IDX64=numel447 >= 2**31, num_warps=4)
    # replaces: torch.Tensor.view (line 265)
    v449 = v448.view(10, 28, 28, 192)
    # replaces: torch.roll (line 269)
    v450 = torch.roll(v449, shifts=(-3, -3), dims=(1, 2))
    # replaces: torch.Tensor.view (line 52)
    v451 = v450.view(10, 4, 7, 4, 7, 192)
    # replaces: torch.Tensor.permute (line 53)
    v452 = v451.permute(0, 1, 3, 2, 4, 5)
    # replaces: torch.Tensor.contiguous (line 53)
    v453 = v452.contiguous()
    # replaces: torch.Tensor.view (line 53)
    v454 = v453.view(-1, 7, 7, 192)
    # replaces: torch.Tensor.view (line 275)
    v455 = v454.view(-1, 49, 192)
    return v448, v455


# ---- sk69 linear_dropout_roll_2: triton_gemm64x64x32_w4_s3_tf32x3_b1024_w4 (builtin) ----
"""Subkernel linear_dropout_roll_2 (lines 69-289), builtin variant triton_gemm64x64x32_w4_s3_tf32x3_b1024_w4.

Generated by MKEvolve's builtin proposer; sizes are read from the tensors at run time.
"""


MK_USES_TORCH = ("roll", )


@triton.jit
def sk69__gemm_linear_kernel1(a_ptr, b_ptr, bias_ptr, epi_v498_ptr, epi_D0, epi_D1, epi_D2, M, N, K, stride_ab, stride_am, stride_ak,
        stride_bb, stride_bk, stride_bn, B1, stride_ab1, stride_bb1,
        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
        BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, IDX64: tl.constexpr):
    # replaces: torch.nn.functional.linear (line 184)
    # grouped program order: GROUP_M row tiles share each column tile in L2;
    # batches on the same grid axis (dim 1 of a grid allows only 65535)
    pid = tl.program_id(0)
    num_m = tl.cdiv(M, BLOCK_M)
    num_n = tl.cdiv(N, BLOCK_N)
    batch = pid // (num_m * num_n)
    pid = pid % (num_m * num_n)
    group = pid // (GROUP_M * num_n)
    first_m = group * GROUP_M
    group_size = tl.minimum(num_m - first_m, GROUP_M)
    pid_m = first_m + (pid % group_size)
    pid_n = (pid % (GROUP_M * num_n)) // group_size
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    if IDX64:  # an operand's storage or the result has more than 2**31 elements
        batch = batch.to(tl.int64)
        rm = rm.to(tl.int64)
        rn = rn.to(tl.int64)
        rk = rk.to(tl.int64)
    # a second batch dim (4-d: heads) of B1, each operand by its own strides
    b0 = batch // B1
    b1 = batch % B1
    a_base = a_ptr + b0 * stride_ab + b1 * stride_ab1
    b_base = b_ptr + b0 * stride_bb + b1 * stride_bb1
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        kk = k0 + rk
        a = tl.load(a_base + rm[:, None] * stride_am + kk[None, :] * stride_ak,
                    mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
        b = tl.load(b_base + kk[:, None] * stride_bk + rn[None, :] * stride_bn,
                    mask=(kk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(a, b, input_precision="tf32x3")
    acc += tl.load(bias_ptr + rn, mask=rn < N, other=0.0)[None, :]
    offs = batch * M * N + rm[:, None] * N + rn[None, :]
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    # fused epilogue
    v498 = acc  # dropout (line 185)
    tl.store(epi_v498_ptr + offs, v498, mask=mask)


def sk69_run(v496, layers_1_blocks_1_attn_proj_weight, layers_1_blocks_1_attn_proj_bias):
    # replaces: torch.nn.functional.linear (line 184)
    # replaces: torch.nn.functional.dropout (line 185)
    a497 = v496.contiguous()
    b497 = layers_1_blocks_1_attn_proj_weight
    b1_497, sab1_497, sbb1_497 = 1, 0, 0
    k497 = a497.shape[-1]
    m497 = a497.numel() // max(k497, 1)
    batch497, sab497, sam497, sak497 = 1, 0, k497, 1
    n497 = b497.shape[0]
    sbb497, sbk497, sbn497 = 0, b497.stride(1), b497.stride(0)
    out497 = tuple(a497.shape[:-1]) + (n497,)
    if k497 != (b497.shape[1] if True else b497.shape[-2]):
        raise ValueError("matrix shapes do not match")
    v498 = torch.empty(out497, device=a497.device, dtype=torch.float32)
    if m497 * n497 * batch497 > 0:
        grid = (triton.cdiv(m497, 64) * triton.cdiv(n497, 64) * batch497,)
        sk69__gemm_linear_kernel1[grid](
            a497, b497, layers_1_blocks_1_attn_proj_bias, v498, out497[0], out497[1], out497[2], m497, n497, k497, sab497, sam497, sak497, sbb497, sbk497, sbn497,
            b1_497, sab1_497, sbb1_497,
            BLOCK_M=64, BLOCK_N=64, BLOCK_K=32, GROUP_M=8,
            IDX64=max(a497.untyped_storage().nbytes() // 4,
                      b497.untyped_storage().nbytes() // 4, batch497 * m497 * n497) >= 2**31,
            num_warps=4, num_stages=3)
    # replaces: torch.Tensor.view (line 281)
    v499 = v498.view(-1, 7, 7, 192)
    # replaces: torch.Tensor.view (line 69)
    v500 = v499.view(10, 4, 4, 7, 7, -1)
    # replaces: torch.Tensor.permute (line 70)
    v501 = v500.permute(0, 1, 3, 2, 4, 5)
    # replaces: torch.Tensor.contiguous (line 70)
    v502 = v501.contiguous()
    # replaces: torch.Tensor.view (line 70)
    v503 = v502.view(10, 28, 28, -1)
    # replaces: torch.roll (line 286)
    v504 = torch.roll(v503, shifts=(3, 3), dims=(1, 2))
    # replaces: torch.Tensor.view (line 289)
    v505 = v504.view(10, 784, 192)
    return v505


# ---- sk73 layer_norm_add_cat_2: triton_b1024_w4 (builtin) ----
"""Subkernel layer_norm_add_cat_2 (lines 293-330), builtin variant triton_b1024_w4.

Generated by MKEvolve's builtin proposer; sizes are read from the tensors at run time.
"""


MK_USES_TORCH = ("cat", )


@triton.jit
def sk73__norm_layer_norm_kernel1(v512_ptr, w_ptr, b_ptr, epi_v507_ptr, epi_v514_ptr, epi_D0, epi_D1, epi_D2, M, BLOCK: tl.constexpr, IDX64: tl.constexpr):
    # replaces: torch.nn.functional.layer_norm (line 293)
    # one program per layer_norm row: statistics pass, then normalise + store
    pid = tl.program_id(0)
    lanes = tl.arange(0, BLOCK)
    if IDX64:  # more than 2**31 elements: 64-bit addresses
        pid = pid.to(tl.int64)
        lanes = lanes.to(tl.int64)
    row = pid
    cnt = tl.zeros([BLOCK], dtype=tl.float32)
    mean = tl.zeros([BLOCK], dtype=tl.float32)
    m2 = tl.zeros([BLOCK], dtype=tl.float32)
    for r0 in range(0, M, BLOCK):
        r = r0 + lanes
        mask = r < M
        offs = row * M + r
        x = tl.load(v512_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        cnt += tl.where(mask, 1.0, 0.0)
        delta = tl.where(mask, x - mean, 0.0)
        mean += delta / tl.maximum(cnt, 1.0)
        m2 += delta * tl.where(mask, x - mean, 0.0)
    tot = tl.sum(cnt, axis=0)
    gmean = tl.sum(cnt * mean, axis=0) / tot
    dm = tl.where(cnt > 0, mean - gmean, 0.0)
    var = tl.sum(m2 + cnt * dm * dm, axis=0) / tot
    rstd = 1.0 / tl.sqrt(var + 1e-05)
    for r0 in range(0, M, BLOCK):
        r = r0 + lanes
        mask = r < M
        offs = row * M + r
        x = tl.load(v512_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        y = (x - gmean) * rstd
        ch = r
        y = y * tl.load(w_ptr + ch, mask=mask, other=1.0)
        y = y + tl.load(b_ptr + ch, mask=mask, other=0.0)
        # fused epilogue
        epi_v507 = tl.load(epi_v507_ptr + offs, mask=mask, other=0)
        v514 = epi_v507 + y  # add (line 293)
        tl.store(epi_v514_ptr + offs, v514, mask=mask)


def sk73_run(v512, layers_1_blocks_1_norm2_weight, layers_1_blocks_1_norm2_bias, v507):
    # replaces: torch.nn.functional.layer_norm (line 293)
    # replaces: torch.Tensor.add (line 293)
    in513 = v512.shape
    in513_device = v512.device
    numel513 = math.prod(in513)
    m513 = math.prod(in513[2:])
    rows513 = numel513 // max(m513, 1)
    lay513 = ()
    out513 = tuple(in513)
    v514 = torch.empty(out513, device=in513_device, dtype=torch.float32)
    if rows513 * m513 > 0:
        sk73__norm_layer_norm_kernel1[(rows513,)](
            v512.contiguous(), layers_1_blocks_1_norm2_weight.contiguous(), layers_1_blocks_1_norm2_bias.contiguous(), v507.contiguous(), v514, out513[0], out513[1], out513[2], m513, *lay513, BLOCK=1024, IDX64=numel513 >= 2**31, num_warps=4)
    # replaces: torch.Tensor.view (line 323)
    v515 = v514.view(10, 28, 28, 192)
    # replaces: torch.Tensor.__getitem__ (line 325)
    v516 = torch.Tensor.__getitem__(v515, (slice(None, None, None), slice(0, None, 2), slice(0, None, 2), slice(None, None, None)))
    # replaces: torch.Tensor.__getitem__ (line 326)
    v517 = torch.Tensor.__getitem__(v515, (slice(None, None, None), slice(1, None, 2), slice(0, None, 2), slice(None, None, None)))
    # replaces: torch.Tensor.__getitem__ (line 327)
    v518 = torch.Tensor.__getitem__(v515, (slice(None, None, None), slice(0, None, 2), slice(1, None, 2), slice(None, None, None)))
    # replaces: torch.Tensor.__getitem__ (line 328)
    v519 = torch.Tensor.__getitem__(v515, (slice(None, None, None), slice(1, None, 2), slice(1, None, 2), slice(None, None, None)))
    # replaces: torch.cat (line 329)
    v520 = torch.cat([v516, v517, v518, v519], -1)
    # replaces: torch.Tensor.view (line 330)
    v521 = v520.view(10, -1, 768)
    return v521


# ---- sk75 layer_norm_2: triton_b1024_w4 (builtin) ----
"""Subkernel layer_norm_2 (lines 52-333), builtin variant triton_b1024_w4.

Generated by MKEvolve's builtin proposer; sizes are read from the tensors at run time.
"""



@triton.jit
def sk75__norm_layer_norm_kernel1(v522_ptr, w_ptr, b_ptr, v523_ptr, M, BLOCK: tl.constexpr, IDX64: tl.constexpr):
    # replaces: torch.nn.functional.layer_norm (line 333)
    # one program per layer_norm row: statistics pass, then normalise + store
    pid = tl.program_id(0)
    lanes = tl.arange(0, BLOCK)
    if IDX64:  # more than 2**31 elements: 64-bit addresses
        pid = pid.to(tl.int64)
        lanes = lanes.to(tl.int64)
    row = pid
    cnt = tl.zeros([BLOCK], dtype=tl.float32)
    mean = tl.zeros([BLOCK], dtype=tl.float32)
    m2 = tl.zeros([BLOCK], dtype=tl.float32)
    for r0 in range(0, M, BLOCK):
        r = r0 + lanes
        mask = r < M
        offs = row * M + r
        x = tl.load(v522_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        cnt += tl.where(mask, 1.0, 0.0)
        delta = tl.where(mask, x - mean, 0.0)
        mean += delta / tl.maximum(cnt, 1.0)
        m2 += delta * tl.where(mask, x - mean, 0.0)
    tot = tl.sum(cnt, axis=0)
    gmean = tl.sum(cnt * mean, axis=0) / tot
    dm = tl.where(cnt > 0, mean - gmean, 0.0)
    var = tl.sum(m2 + cnt * dm * dm, axis=0) / tot
    rstd = 1.0 / tl.sqrt(var + 1e-05)
    for r0 in range(0, M, BLOCK):
        r = r0 + lanes
        mask = r < M
        offs = row * M + r
        x = tl.load(v522_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        y = (x - gmean) * rstd
        ch = r
        y = y * tl.load(w_ptr + ch, mask=mask, other=1.0)
        y = y + tl.load(b_ptr + ch, mask=mask, other=0.0)
        tl.store(v523_ptr + offs, y, mask=mask)


def sk75_run(v522, layers_1_downsample_norm_weight, layers_1_downsample_norm_bias):
    # replaces: torch.nn.functional.layer_norm (line 333)
    in523 = v522.shape
    in523_device = v522.device
    numel523 = math.prod(in523)
    m523 = math.prod(in523[2:])
    rows523 = numel523 // max(m523, 1)
    lay523 = ()
    out523 = tuple(in523)
    v523 = torch.empty(out523, device=in523_device, dtype=torch.float32)
    if rows523 * m523 > 0:
        sk75__norm_layer_norm_kernel1[(rows523,)](
            v522.contiguous(), layers_1_downsample_norm_weight.contiguous(), layers_1_downsample_norm_bias.contiguous(), v523, m523, *lay523, BLOCK=1024, IDX64=numel523 >= 2**31, num_warps=4)
    # replaces: torch.Tensor.view (line 265)
    v524 = v523.view(10, 14, 14, 384)
    # replaces: torch.Tensor.view (line 52)
    v525 = v524.view(10, 2, 7, 2, 7, 384)
    # replaces: torch.Tensor.permute (line 53)
    v526 = v525.permute(0, 1, 3, 2, 4, 5)
    # replaces: torch.Tensor.contiguous (line 53)
    v527 = v526.contiguous()
    # replaces: torch.Tensor.view (line 53)
    v528 = v527.view(-1, 7, 7, 384)
    # replaces: torch.Tensor.view (line 275)
    v529 = v528.view(-1, 49, 384)
    return v523, v529


# ---- sk80 matmul_9: triton_gemm64x64x32_w4_s3_tf32x3 (builtin) ----
"""Subkernel matmul_9 (lines 162-162), builtin variant triton_gemm64x64x32_w4_s3_tf32x3.

Generated by MKEvolve's builtin proposer; sizes are read from the tensors at run time.
"""



@triton.jit
def sk80__gemm_matmul_kernel1(a_ptr, b_ptr, v541_ptr, M, N, K, stride_ab, stride_am, stride_ak,
        stride_bb, stride_bk, stride_bn, B1, stride_ab1, stride_bb1,
        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
        BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, IDX64: tl.constexpr):
    # replaces: torch.Tensor.matmul (line 162)
    # grouped program order: GROUP_M row tiles share each column tile in L2;
    # batches on the same grid axis (dim 1 of a grid allows only 65535)
    pid = tl.program_id(0)
    num_m = tl.cdiv(M, BLOCK_M)
    num_n = tl.cdiv(N, BLOCK_N)
    batch = pid // (num_m * num_n)
    pid = pid % (num_m * num_n)
    group = pid // (GROUP_M * num_n)
    first_m = group * GROUP_M
    group_size = tl.minimum(num_m - first_m, GROUP_M)
    pid_m = first_m + (pid % group_size)
    pid_n = (pid % (GROUP_M * num_n)) // group_size
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    if IDX64:  # an operand's storage or the result has more than 2**31 elements
        batch = batch.to(tl.int64)
        rm = rm.to(tl.int64)
        rn = rn.to(tl.int64)
        rk = rk.to(tl.int64)
    # a second batch dim (4-d: heads) of B1, each operand by its own strides
    b0 = batch // B1
    b1 = batch % B1
    a_base = a_ptr + b0 * stride_ab + b1 * stride_ab1
    b_base = b_ptr + b0 * stride_bb + b1 * stride_bb1
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        kk = k0 + rk
        a = tl.load(a_base + rm[:, None] * stride_am + kk[None, :] * stride_ak,
                    mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
        b = tl.load(b_base + kk[:, None] * stride_bk + rn[None, :] * stride_bn,
                    mask=(kk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(a, b, input_precision="tf32x3")
    offs = batch * M * N + rm[:, None] * N + rn[None, :]
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    tl.store(v541_ptr + offs, acc, mask=mask)


def sk80_run(v538, v540):
    # replaces: torch.Tensor.matmul (line 162)
    a541 = v538
    b541 = v540
    bat541, b1_541, m541, k541 = a541.shape
    if tuple(b541.shape[:2]) != (bat541, b1_541):
        raise ValueError("batch dims do not match")
    n541 = b541.shape[3]
    batch541 = bat541 * b1_541
    sab541, sab1_541, sam541, sak541 = a541.stride()
    sbb541, sbb1_541, sbk541, sbn541 = b541.stride()
    out541 = (bat541, b1_541, m541, n541)
    if k541 != (b541.shape[0] if False else b541.shape[-2]):
        raise ValueError("matrix shapes do not match")
    v541 = torch.empty(out541, device=a541.device, dtype=torch.float32)
    if m541 * n541 * batch541 > 0:
        grid = (triton.cdiv(m541, 64) * triton.cdiv(n541, 64) * batch541,)
        sk80__gemm_matmul_kernel1[grid](
            a541, b541, v541, m541, n541, k541, sab541, sam541, sak541, sbb541, sbk541, sbn541,
            b1_541, sab1_541, sbb1_541,
            BLOCK_M=64, BLOCK_N=64, BLOCK_K=32, GROUP_M=8,
            IDX64=max(a541.untyped_storage().nbytes() // 4,
                      b541.untyped_storage().nbytes() // 4, batch541 * m541 * n541) >= 2**31,
            num_warps=4, num_stages=3)
    return v541


# ---- sk88 linear_dropout_7: triton_gemm64x64x32_w4_s3_tf32x3_b1024_w4 (builtin) ----
"""Subkernel linear_dropout_7 (lines 69-289), builtin variant triton_gemm64x64x32_w4_s3_tf32x3_b1024_w4.

Generated by MKEvolve's builtin proposer; sizes are read from the tensors at run time.
"""



@triton.jit
def sk88__gemm_linear_kernel1(a_ptr, b_ptr, bias_ptr, epi_v567_ptr, epi_D0, epi_D1, epi_D2, M, N, K, stride_ab, stride_am, stride_ak,
        stride_bb, stride_bk, stride_bn, B1, stride_ab1, stride_bb1,
        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
        BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, IDX64: tl.constexpr):
    # replaces: torch.nn.functional.linear (line 184)
    # grouped program order: GROUP_M row tiles share each column tile in L2;
    # batches on the same grid axis (dim 1 of a grid allows only 65535)
    pid = tl.program_id(0)
    num_m = tl.cdiv(M, BLOCK_M)
    num_n = tl.cdiv(N, BLOCK_N)
    batch = pid // (num_m * num_n)
    pid = pid % (num_m * num_n)
    group = pid // (GROUP_M * num_n)
    first_m = group * GROUP_M
    group_size = tl.minimum(num_m - first_m, GROUP_M)
    pid_m = first_m + (pid % group_size)
    pid_n = (pid % (GROUP_M * num_n)) // group_size
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    if IDX64:  # an operand's storage or the result has more than 2**31 elements
        batch = batch.to(tl.int64)
        rm = rm.to(tl.int64)
        rn = rn.to(tl.int64)
        rk = rk.to(tl.int64)
    # a second batch dim (4-d: heads) of B1, each operand by its own strides
    b0 = batch // B1
    b1 = batch % B1
    a_base = a_ptr + b0 * stride_ab + b1 * stride_ab1
    b_base = b_ptr + b0 * stride_bb + b1 * stride_bb1
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        kk = k0 + rk
        a = tl.load(a_base + rm[:, None] * stride_am + kk[None, :] * stride_ak,
                    mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
        b = tl.load(b_base + kk[:, None] * stride_bk + rn[None, :] * stride_bn,
                    mask=(kk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(a, b, input_precision="tf32x3")
    acc += tl.load(bias_ptr + rn, mask=rn < N, other=0.0)[None, :]
    offs = batch * M * N + rm[:, None] * N + rn[None, :]
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    # fused epilogue
    v567 = acc  # dropout (line 185)
    tl.store(epi_v567_ptr + offs, v567, mask=mask)


def sk88_run(v565, layers_2_blocks_0_attn_proj_weight, layers_2_blocks_0_attn_proj_bias):
    # replaces: torch.nn.functional.linear (line 184)
    # replaces: torch.nn.functional.dropout (line 185)
    a566 = v565.contiguous()
    b566 = layers_2_blocks_0_attn_proj_weight
    b1_566, sab1_566, sbb1_566 = 1, 0, 0
    k566 = a566.shape[-1]
    m566 = a566.numel() // max(k566, 1)
    batch566, sab566, sam566, sak566 = 1, 0, k566, 1
    n566 = b566.shape[0]
    sbb566, sbk566, sbn566 = 0, b566.stride(1), b566.stride(0)
    out566 = tuple(a566.shape[:-1]) + (n566,)
    if k566 != (b566.shape[1] if True else b566.shape[-2]):
        raise ValueError("matrix shapes do not match")
    v567 = torch.empty(out566, device=a566.device, dtype=torch.float32)
    if m566 * n566 * batch566 > 0:
        grid = (triton.cdiv(m566, 64) * triton.cdiv(n566, 64) * batch566,)
        sk88__gemm_linear_kernel1[grid](
            a566, b566, layers_2_blocks_0_attn_proj_bias, v567, out566[0], out566[1], out566[2], m566, n566, k566, sab566, sam566, sak566, sbb566, sbk566, sbn566,
            b1_566, sab1_566, sbb1_566,
            BLOCK_M=64, BLOCK_N=64, BLOCK_K=32, GROUP_M=8,
            IDX64=max(a566.untyped_storage().nbytes() // 4,
                      b566.untyped_storage().nbytes() // 4, batch566 * m566 * n566) >= 2**31,
            num_warps=4, num_stages=3)
    # replaces: torch.Tensor.view (line 281)
    v568 = v567.view(-1, 7, 7, 384)
    # replaces: torch.Tensor.view (line 69)
    v569 = v568.view(10, 2, 2, 7, 7, -1)
    # replaces: torch.Tensor.permute (line 70)
    v570 = v569.permute(0, 1, 3, 2, 4, 5)
    # replaces: torch.Tensor.contiguous (line 70)
    v571 = v570.contiguous()
    # replaces: torch.Tensor.view (line 70)
    v572 = v571.view(10, 14, 14, -1)
    # replaces: torch.Tensor.view (line 289)
    v573 = v572.view(10, 196, 384)
    return v573


# ---- sk90 linear_gelu_dropout_5: triton_gemm64x64x32_w4_s3_tf32x3_b1024_w4 (builtin) ----
"""Subkernel linear_gelu_dropout_5 (lines 34-36), builtin variant triton_gemm64x64x32_w4_s3_tf32x3_b1024_w4.

Generated by MKEvolve's builtin proposer; sizes are read from the tensors at run time.
"""



@triton.jit
def sk90__gemm_linear_kernel1(a_ptr, b_ptr, bias_ptr, epi_v578_ptr, epi_D0, epi_D1, epi_D2, M, N, K, stride_ab, stride_am, stride_ak,
        stride_bb, stride_bk, stride_bn, B1, stride_ab1, stride_bb1,
        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
        BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, IDX64: tl.constexpr):
    # replaces: torch.nn.functional.linear (line 34)
    # grouped program order: GROUP_M row tiles share each column tile in L2;
    # batches on the same grid axis (dim 1 of a grid allows only 65535)
    pid = tl.program_id(0)
    num_m = tl.cdiv(M, BLOCK_M)
    num_n = tl.cdiv(N, BLOCK_N)
    batch = pid // (num_m * num_n)
    pid = pid % (num_m * num_n)
    group = pid // (GROUP_M * num_n)
    first_m = group * GROUP_M
    group_size = tl.minimum(num_m - first_m, GROUP_M)
    pid_m = first_m + (pid % group_size)
    pid_n = (pid % (GROUP_M * num_n)) // group_size
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    if IDX64:  # an operand's storage or the result has more than 2**31 elements
        batch = batch.to(tl.int64)
        rm = rm.to(tl.int64)
        rn = rn.to(tl.int64)
        rk = rk.to(tl.int64)
    # a second batch dim (4-d: heads) of B1, each operand by its own strides
    b0 = batch // B1
    b1 = batch % B1
    a_base = a_ptr + b0 * stride_ab + b1 * stride_ab1
    b_base = b_ptr + b0 * stride_bb + b1 * stride_bb1
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        kk = k0 + rk
        a = tl.load(a_base + rm[:, None] * stride_am + kk[None, :] * stride_ak,
                    mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
        b = tl.load(b_base + kk[:, None] * stride_bk + rn[None, :] * stride_bn,
                    mask=(kk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(a, b, input_precision="tf32x3")
    acc += tl.load(bias_ptr + rn, mask=rn < N, other=0.0)[None, :]
    offs = batch * M * N + rm[:, None] * N + rn[None, :]
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    # fused epilogue
    v577 = 0.5 * acc * (1.0 + tl.erf(acc * 0.7071067811865476))  # gelu (line 35)
    v578 = v577  # dropout (line 36)
    tl.store(epi_v578_ptr + offs, v578, mask=mask)


def sk90_run(v575, layers_2_blocks_0_mlp_fc1_weight, layers_2_blocks_0_mlp_fc1_bias):
    # replaces: torch.nn.functional.linear (line 34)
    # replaces: torch.nn.functional.gelu (line 35), torch.nn.functional.dropout (line 36)
    a576 = v575.contiguous()
    b576 = layers_2_blocks_0_mlp_fc1_weight
    b1_576, sab1_576, sbb1_576 = 1, 0, 0
    k576 = a576.shape[-1]
    m576 = a576.numel() // max(k576, 1)
    batch576, sab576, sam576, sak576 = 1, 0, k576, 1
    n576 = b576.shape[0]
    sbb576, sbk576, sbn576 = 0, b576.stride(1), b576.stride(0)
    out576 = tuple(a576.shape[:-1]) + (n576,)
    if k576 != (b576.shape[1] if True else b576.shape[-2]):
        raise ValueError("matrix shapes do not match")
    v578 = torch.empty(out576, device=a576.device, dtype=torch.float32)
    if m576 * n576 * batch576 > 0:
        grid = (triton.cdiv(m576, 64) * triton.cdiv(n576, 64) * batch576,)
        sk90__gemm_linear_kernel1[grid](
            a576, b576, layers_2_blocks_0_mlp_fc1_bias, v578, out576[0], out576[1], out576[2], m576, n576, k576, sab576, sam576, sak576, sbb576, sbk576, sbn576,
            b1_576, sab1_576, sbb1_576,
            BLOCK_M=64, BLOCK_N=64, BLOCK_K=32, GROUP_M=8,
            IDX64=max(a576.untyped_storage().nbytes() // 4,
                      b576.untyped_storage().nbytes() // 4, batch576 * m576 * n576) >= 2**31,
            num_warps=4, num_stages=3)
    return v578


# ---- sk91 linear_dropout_8: triton_gemm64x64x32_w4_s3_tf32x3_b1024_w4 (builtin) ----
"""Subkernel linear_dropout_8 (lines 37-38), builtin variant triton_gemm64x64x32_w4_s3_tf32x3_b1024_w4.

Generated by MKEvolve's builtin proposer; sizes are read from the tensors at run time.
"""



@triton.jit
def sk91__gemm_linear_kernel1(a_ptr, b_ptr, bias_ptr, epi_v580_ptr, epi_D0, epi_D1, epi_D2, M, N, K, stride_ab, stride_am, stride_ak,
        stride_bb, stride_bk, stride_bn, B1, stride_ab1, stride_bb1,
        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
        BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, IDX64: tl.constexpr):
    # replaces: torch.nn.functional.linear (line 37)
    # grouped program order: GROUP_M row tiles share each column tile in L2;
    # batches on the same grid axis (dim 1 of a grid allows only 65535)
    pid = tl.program_id(0)
    num_m = tl.cdiv(M, BLOCK_M)
    num_n = tl.cdiv(N, BLOCK_N)
    batch = pid // (num_m * num_n)
    pid = pid % (num_m * num_n)
    group = pid // (GROUP_M * num_n)
    first_m = group * GROUP_M
    group_size = tl.minimum(num_m - first_m, GROUP_M)
    pid_m = first_m + (pid % group_size)
    pid_n = (pid % (GROUP_M * num_n)) // group_size
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    if IDX64:  # an operand's storage or the result has more than 2**31 elements
        batch = batch.to(tl.int64)
        rm = rm.to(tl.int64)
        rn = rn.to(tl.int64)
        rk = rk.to(tl.int64)
    # a second batch dim (4-d: heads) of B1, each operand by its own strides
    b0 = batch // B1
    b1 = batch % B1
    a_base = a_ptr + b0 * stride_ab + b1 * stride_ab1
    b_base = b_ptr + b0 * stride_bb + b1 * stride_bb1
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        kk = k0 + rk
        a = tl.load(a_base + rm[:, None] * stride_am + kk[None, :] * stride_ak,
                    mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
        b = tl.load(b_base + kk[:, None] * stride_bk + rn[None, :] * stride_bn,
                    mask=(kk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(a, b, input_precision="tf32x3")
    acc += tl.load(bias_ptr + rn, mask=rn < N, other=0.0)[None, :]
    offs = batch * M * N + rm[:, None] * N + rn[None, :]
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    # fused epilogue
    v580 = acc  # dropout (line 38)
    tl.store(epi_v580_ptr + offs, v580, mask=mask)


def sk91_run(v578, layers_2_blocks_0_mlp_fc2_weight, layers_2_blocks_0_mlp_fc2_bias):
    # replaces: torch.nn.functional.linear (line 37)
    # replaces: torch.nn.functional.dropout (line 38)
    a579 = v578.contiguous()
    b579 = layers_2_blocks_0_mlp_fc2_weight
    b1_579, sab1_579, sbb1_579 = 1, 0, 0
    k579 = a579.shape[-1]
    m579 = a579.numel() // max(k579, 1)
    batch579, sab579, sam579, sak579 = 1, 0, k579, 1
    n579 = b579.shape[0]
    sbb579, sbk579, sbn579 = 0, b579.stride(1), b579.stride(0)
    out579 = tuple(a579.shape[:-1]) + (n579,)
    if k579 != (b579.shape[1] if True else b579.shape[-2]):
        raise ValueError("matrix shapes do not match")
    v580 = torch.empty(out579, device=a579.device, dtype=torch.float32)
    if m579 * n579 * batch579 > 0:
        grid = (triton.cdiv(m579, 64) * triton.cdiv(n579, 64) * batch579,)
        sk91__gemm_linear_kernel1[grid](
            a579, b579, layers_2_blocks_0_mlp_fc2_bias, v580, out579[0], out579[1], out579[2], m579, n579, k579, sab579, sam579, sak579, sbb579, sbk579, sbn579,
            b1_579, sab1_579, sbb1_579,
            BLOCK_M=64, BLOCK_N=64, BLOCK_K=32, GROUP_M=8,
            IDX64=max(a579.untyped_storage().nbytes() // 4,
                      b579.untyped_storage().nbytes() // 4, batch579 * m579 * n579) >= 2**31,
            num_warps=4, num_stages=3)
    return v580


# ---- sk92 layer_norm_add_roll_3: triton_b1024_w4 (builtin) ----
"""Subkernel layer_norm_add_roll_3 (lines 52-293), builtin variant triton_b1024_w4.

Generated by MKEvolve's builtin proposer; sizes are read from the tensors at run time.
"""


MK_USES_TORCH = ("roll", )


@triton.jit
def sk92__norm_layer_norm_kernel1(v580_ptr, w_ptr, b_ptr, epi_v575_ptr, epi_v582_ptr, epi_D0, epi_D1, epi_D2, M, BLOCK: tl.constexpr, IDX64: tl.constexpr):
    # replaces: torch.nn.functional.layer_norm (line 293)
    # one program per layer_norm row: statistics pass, then normalise + store
    pid = tl.program_id(0)
    lanes = tl.arange(0, BLOCK)
    if IDX64:  # more than 2**31 elements: 64-bit addresses
        pid = pid.to(tl.int64)
        lanes = lanes.to(tl.int64)
    row = pid
    cnt = tl.zeros([BLOCK], dtype=tl.float32)
    mean = tl.zeros([BLOCK], dtype=tl.float32)
    m2 = tl.zeros([BLOCK], dtype=tl.float32)
    for r0 in range(0, M, BLOCK):
        r = r0 + lanes
        mask = r < M
        offs = row * M + r
        x = tl.load(v580_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        cnt += tl.where(mask, 1.0, 0.0)
        delta = tl.where(mask, x - mean, 0.0)
        mean += delta / tl.maximum(cnt, 1.0)
        m2 += delta * tl.where(mask, x - mean, 0.0)
    tot = tl.sum(cnt, axis=0)
    gmean = tl.sum(cnt * mean, axis=0) / tot
    dm = tl.where(cnt > 0, mean - gmean, 0.0)
    var = tl.sum(m2 + cnt * dm * dm, axis=0) / tot
    rstd = 1.0 / tl.sqrt(var + 1e-05)
    for r0 in range(0, M, BLOCK):
        r = r0 + lanes
        mask = r < M
        offs = row * M + r
        x = tl.load(v580_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        y = (x - gmean) * rstd
        ch = r
        y = y * tl.load(w_ptr + ch, mask=mask, other=1.0)
        y = y + tl.load(b_ptr + ch, mask=mask, other=0.0)
        # fused epilogue
        epi_v575 = tl.load(epi_v575_ptr + offs, mask=mask, other=0)
        v582 = epi_v575 + y  # add (line 293)
        tl.store(epi_v582_ptr + offs, v582, mask=mask)


def sk92_run(v580, layers_2_blocks_0_norm2_weight, layers_2_blocks_0_norm2_bias, v575):
    # replaces: torch.nn.functional.layer_norm (line 293)
    # replaces: torch.Tensor.add (line 293)
    in581 = v580.shape
    in581_device = v580.device
    numel581 = math.prod(in581)
    m581 = math.prod(in581[2:])
    rows581 = numel581 // max(m581, 1)
    lay581 = ()
    out581 = tuple(in581)
    v582 = torch.empty(out581, device=in581_device, dtype=torch.float32)
    if rows581 * m581 > 0:
        sk92__norm_layer_norm_kernel1[(rows581,)](
            v580.contiguous(), layers_2_blocks_0_norm2_weight.contiguous(), layers_2_blocks_0_norm2_bias.contiguous(), v575.contiguous(), v582, out581[0], out581[1], out581[2], m581, *lay581, BLOCK=1024, IDX64=numel581 >= 2**31, num_warps=4)
    # replaces: torch.Tensor.view (line 265)
    v583 = v582.view(10, 14, 14, 384)
    # replaces: torch.roll (line 269)
    v584 = torch.roll(v583, shifts=(-3, -3), dims=(1, 2))
    # replaces: torch.Tensor.view (line 52)
    v585 = v584.view(10, 2, 7, 2, 7, 384)
    # replaces: torch.Tensor.permute (line 53)
    v586 = v585.permute(0, 1, 3, 2, 4, 5)
    # replaces: torch.Tensor.contiguous (line 53)
    v587 = v586.contiguous()
    # replaces: torch.Tensor.view (line 53)
    v588 = v587.view(-1, 7, 7, 384)
    # replaces: torch.Tensor.view (line 275)
    v589 = v588.view(-1, 49, 384)
    return v582, v589


# ---- sk106 linear_dropout_roll_3: triton_gemm128x128x32_w8_s3_tf32x3_b1024_w4 (builtin) ----
"""Subkernel linear_dropout_roll_3 (lines 69-289), builtin variant triton_gemm128x128x32_w8_s3_tf32x3_b1024_w4.

Generated by MKEvolve's builtin proposer; sizes are read from the tensors at run time.
"""


MK_USES_TORCH = ("roll", )


@triton.jit
def sk106__gemm_linear_kernel1(a_ptr, b_ptr, bias_ptr, epi_v632_ptr, epi_D0, epi_D1, epi_D2, M, N, K, stride_ab, stride_am, stride_ak,
        stride_bb, stride_bk, stride_bn, B1, stride_ab1, stride_bb1,
        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
        BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, IDX64: tl.constexpr):
    # replaces: torch.nn.functional.linear (line 184)
    # grouped program order: GROUP_M row tiles share each column tile in L2;
    # batches on the same grid axis (dim 1 of a grid allows only 65535)
    pid = tl.program_id(0)
    num_m = tl.cdiv(M, BLOCK_M)
    num_n = tl.cdiv(N, BLOCK_N)
    batch = pid // (num_m * num_n)
    pid = pid % (num_m * num_n)
    group = pid // (GROUP_M * num_n)
    first_m = group * GROUP_M
    group_size = tl.minimum(num_m - first_m, GROUP_M)
    pid_m = first_m + (pid % group_size)
    pid_n = (pid % (GROUP_M * num_n)) // group_size
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    if IDX64:  # an operand's storage or the result has more than 2**31 elements
        batch = batch.to(tl.int64)
        rm = rm.to(tl.int64)
        rn = rn.to(tl.int64)
        rk = rk.to(tl.int64)
    # a second batch dim (4-d: heads) of B1, each operand by its own strides
    b0 = batch // B1
    b1 = batch % B1
    a_base = a_ptr + b0 * stride_ab + b1 * stride_ab1
    b_base = b_ptr + b0 * stride_bb + b1 * stride_bb1
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        kk = k0 + rk
        a = tl.load(a_base + rm[:, None] * stride_am + kk[None, :] * stride_ak,
                    mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
        b = tl.load(b_base + kk[:, None] * stride_bk + rn[None, :] * stride_bn,
                    mask=(kk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(a, b, input_precision="tf32x3")
    acc += tl.load(bias_ptr + rn, mask=rn < N, other=0.0)[None, :]
    offs = batch * M * N + rm[:, None] * N + rn[None, :]
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    # fused epilogue
    v632 = acc  # dropout (line 185)
    tl.store(epi_v632_ptr + offs, v632, mask=mask)


def sk106_run(v630, layers_2_blocks_1_attn_proj_weight, layers_2_blocks_1_attn_proj_bias):
    # replaces: torch.nn.functional.linear (line 184)
    # replaces: torch.nn.functional.dropout (line 185)
    a631 = v630.contiguous()
    b631 = layers_2_blocks_1_attn_proj_weight
    b1_631, sab1_631, sbb1_631 = 1, 0, 0
    k631 = a631.shape[-1]
    m631 = a631.numel() // max(k631, 1)
    batch631, sab631, sam631, sak631 = 1, 0, k631, 1
    n631 = b631.shape[0]
    sbb631, sbk631, sbn631 = 0, b631.stride(1), b631.stride(0)
    out631 = tuple(a631.shape[:-1]) + (n631,)
    if k631 != (b631.shape[1] if True else b631.shape[-2]):
        raise ValueError("matrix shapes do not match")
    v632 = torch.empty(out631, device=a631.device, dtype=torch.float32)
    if m631 * n631 * batch631 > 0:
        grid = (triton.cdiv(m631, 128) * triton.cdiv(n631, 128) * batch631,)
        sk106__gemm_linear_kernel1[grid](
            a631, b631, layers_2_blocks_1_attn_proj_bias, v632, out631[0], out631[1], out631[2], m631, n631, k631, sab631, sam631, sak631, sbb631, sbk631, sbn631,
            b1_631, sab1_631, sbb1_631,
            BLOCK_M=128, BLOCK_N=128, BLOCK_K=32, GROUP_M=8,
            IDX64=max(a631.untyped_storage().nbytes() // 4,
                      b631.untyped_storage().nbytes() // 4, batch631 * m631 * n631) >= 2**31,
            num_warps=8, num_stages=3)
    # replaces: torch.Tensor.view (line 281)
    v633 = v632.view(-1, 7, 7, 384)
    # replaces: torch.Tensor.view (line 69)
    v634 = v633.view(10, 2, 2, 7, 7, -1)
    # replaces: torch.Tensor.permute (line 70)
    v635 = v634.permute(0, 1, 3, 2, 4, 5)
    # replaces: torch.Tensor.contiguous (line 70)
    v636 = v635.contiguous()
    # replaces: torch.Tensor.view (line 70)
    v637 = v636.view(10, 14, 14, -1)
    # replaces: torch.roll (line 286)
    v638 = torch.roll(v637, shifts=(3, 3), dims=(1, 2))
    # replaces: torch.Tensor.view (line 289)
    v639 = v638.view(10, 196, 384)
    return v639


# ---- sk110 layer_norm_add_7: triton_b1024_w4 (builtin) ----
"""Subkernel layer_norm_add_7 (lines 52-293), builtin variant triton_b1024_w4.

Generated by MKEvolve's builtin proposer; sizes are read from the tensors at run time.
"""



@triton.jit
def sk110__norm_layer_norm_kernel1(v646_ptr, w_ptr, b_ptr, epi_v641_ptr, epi_v648_ptr, epi_D0, epi_D1, epi_D2, M, BLOCK: tl.constexpr, IDX64: tl.constexpr):
    # replaces: torch.nn.functional.layer_norm (line 293)
    # one program per layer_norm row: statistics pass, then normalise + store
    pid = tl.program_id(0)
    lanes = tl.arange(0, BLOCK)
    if IDX64:  # more than 2**31 elements: 64-bit addresses
        pid = pid.to(tl.int64)
        lanes = lanes.to(tl.int64)
    row = pid
    cnt = tl.zeros([BLOCK], dtype=tl.float32)
    mean = tl.zeros([BLOCK], dtype=tl.float32)
    m2 = tl.zeros([BLOCK], dtype=tl.float32)
    for r0 in range(0, M, BLOCK):
        r = r0 + lanes
        mask = r < M
        offs = row * M + r
        x = tl.load(v646_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        cnt += tl.where(mask, 1.0, 0.0)
        delta = tl.where(mask, x - mean, 0.0)
        mean += delta / tl.maximum(cnt, 1.0)
        m2 += delta * tl.where(mask, x - mean, 0.0)
    tot = tl.sum(cnt, axis=0)
    gmean = tl.sum(cnt * mean, axis=0) / tot
    dm = tl.where(cnt > 0, mean - gmean, 0.0)
    var = tl.sum(m2 + cnt * dm * dm, axis=0) / tot
    rstd = 1.0 / tl.sqrt(var + 1e-05)
    for r0 in range(0, M, BLOCK):
        r = r0 + lanes
        mask = r < M
        offs = row * M + r
        x = tl.load(v646_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        y = (x - gmean) * rstd
        ch = r
        y = y * tl.load(w_ptr + ch, mask=mask, other=1.0)
        y = y + tl.load(b_ptr + ch, mask=mask, other=0.0)
        # fused epilogue
        epi_v641 = tl.load(epi_v641_ptr + offs, mask=mask, other=0)
        v648 = epi_v641 + y  # add (line 293)
        tl.store(epi_v648_ptr + offs, v648, mask=mask)


def sk110_run(v646, layers_2_blocks_1_norm2_weight, layers_2_blocks_1_norm2_bias, v641):
    # replaces: torch.nn.functional.layer_norm (line 293)
    # replaces: torch.Tensor.add (line 293)
    in647 = v646.shape
    in647_device = v646.device
    numel647 = math.prod(in647)
    m647 = math.prod(in647[2:])
    rows647 = numel647 // max(m647, 1)
    lay647 = ()
    out647 = tuple(in647)
    v648 = torch.empty(out647, device=in647_device, dtype=torch.float32)
    if rows647 * m647 > 0:
        sk110__norm_layer_norm_kernel1[(rows647,)](
            v646.contiguous(), layers_2_blocks_1_norm2_weight.contiguous(), layers_2_blocks_1_norm2_bias.contiguous(), v641.contiguous(), v648, out647[0], out647[1], out647[2], m647, *lay647, BLOCK=1024, IDX64=numel647 >= 2**31, num_warps=4)
    # replaces: torch.Tensor.view (line 265)
    v649 = v648.view(10, 14, 14, 384)
    # replaces: torch.Tensor.view (line 52)
    v650 = v649.view(10, 2, 7, 2, 7, 384)
    # replaces: torch.Tensor.permute (line 53)
    v651 = v650.permute(0, 1, 3, 2, 4, 5)
    # replaces: torch.Tensor.contiguous (line 53)
    v652 = v651.contiguous()
    # replaces: torch.Tensor.view (line 53)
    v653 = v652.view(-1, 7, 7, 384)
    # replaces: torch.Tensor.view (line 275)
    v654 = v653.view(-1, 49, 384)
    return v648, v654


# ---- sk180 layer_norm_add_cat_3: triton_b1024_w4 (builtin) ----
"""Subkernel layer_norm_add_cat_3 (lines 293-330), builtin variant triton_b1024_w4.

Generated by MKEvolve's builtin proposer; sizes are read from the tensors at run time.
"""


MK_USES_TORCH = ("cat", )


@triton.jit
def sk180__norm_layer_norm_kernel1(v896_ptr, w_ptr, b_ptr, epi_v891_ptr, epi_v898_ptr, epi_D0, epi_D1, epi_D2, M, BLOCK: tl.constexpr, IDX64: tl.constexpr):
    # replaces: torch.nn.functional.layer_norm (line 293)
    # one program per layer_norm row: statistics pass, then normalise + store
    pid = tl.program_id(0)
    lanes = tl.arange(0, BLOCK)
    if IDX64:  # more than 2**31 elements: 64-bit addresses
        pid = pid.to(tl.int64)
        lanes = lanes.to(tl.int64)
    row = pid
    cnt = tl.zeros([BLOCK], dtype=tl.float32)
    mean = tl.zeros([BLOCK], dtype=tl.float32)
    m2 = tl.zeros([BLOCK], dtype=tl.float32)
    for r0 in range(0, M, BLOCK):
        r = r0 + lanes
        mask = r < M
        offs = row * M + r
        x = tl.load(v896_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        cnt += tl.where(mask, 1.0, 0.0)
        delta = tl.where(mask, x - mean, 0.0)
        mean += delta / tl.maximum(cnt, 1.0)
        m2 += delta * tl.where(mask, x - mean, 0.0)
    tot = tl.sum(cnt, axis=0)
    gmean = tl.sum(cnt * mean, axis=0) / tot
    dm = tl.where(cnt > 0, mean - gmean, 0.0)
    var = tl.sum(m2 + cnt * dm * dm, axis=0) / tot
    rstd = 1.0 / tl.sqrt(var + 1e-05)
    for r0 in range(0, M, BLOCK):
        r = r0 + lanes
        mask = r < M
        offs = row * M + r
        x = tl.load(v896_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        y = (x - gmean) * rstd
        ch = r
        y = y * tl.load(w_ptr + ch, mask=mask, other=1.0)
        y = y + tl.load(b_ptr + ch, mask=mask, other=0.0)
        # fused epilogue
        epi_v891 = tl.load(epi_v891_ptr + offs, mask=mask, other=0)
        v898 = epi_v891 + y  # add (line 293)
        tl.store(epi_v898_ptr + offs, v898, mask=mask)


def sk180_run(v896, layers_2_blocks_5_norm2_weight, layers_2_blocks_5_norm2_bias, v891):
    # replaces: torch.nn.functional.layer_norm (line 293)
    # replaces: torch.Tensor.add (line 293)
    in897 = v896.shape
    in897_device = v896.device
    numel897 = math.prod(in897)
    m897 = math.prod(in897[2:])
    rows897 = numel897 // max(m897, 1)
    lay897 = ()
    out897 = tuple(in897)
    v898 = torch.empty(out897, device=in897_device, dtype=torch.float32)
    if rows897 * m897 > 0:
        sk180__norm_layer_norm_kernel1[(rows897,)](
            v896.contiguous(), layers_2_blocks_5_norm2_weight.contiguous(), layers_2_blocks_5_norm2_bias.contiguous(), v891.contiguous(), v898, out897[0], out897[1], out897[2], m897, *lay897, BLOCK=1024, IDX64=numel897 >= 2**31, num_warps=4)
    # replaces: torch.Tensor.view (line 323)
    v899 = v898.view(10, 14, 14, 384)
    # replaces: torch.Tensor.__getitem__ (line 325)
    v900 = torch.Tensor.__getitem__(v899, (slice(None, None, None), slice(0, None, 2), slice(0, None, 2), slice(None, None, None)))
    # replaces: torch.Tensor.__getitem__ (line 326)
    v901 = torch.Tensor.__getitem__(v899, (slice(None, None, None), slice(1, None, 2), slice(0, None, 2), slice(None, None, None)))
    # replaces: torch.Tensor.__getitem__ (line 327)
    v902 = torch.Tensor.__getitem__(v899, (slice(None, None, None), slice(0, None, 2), slice(1, None, 2), slice(None, None, None)))
    # replaces: torch.Tensor.__getitem__ (line 328)
    v903 = torch.Tensor.__getitem__(v899, (slice(None, None, None), slice(1, None, 2), slice(1, None, 2), slice(None, None, None)))
    # replaces: torch.cat (line 329)
    v904 = torch.cat([v900, v901, v902, v903], -1)
    # replaces: torch.Tensor.view (line 330)
    v905 = v904.view(10, -1, 1536)
    return v905


# ---- sk185 normalize_21: triton_b1024_w4 (builtin) ----
"""Subkernel normalize_21 (lines 162-162), builtin variant triton_b1024_w4.

Generated by MKEvolve's builtin proposer; sizes are read from the tensors at run time.
"""



@triton.jit
def sk185__norm_normalize_kernel1(v919_ptr, v922_ptr, M, BLOCK: tl.constexpr, IDX64: tl.constexpr):
    # replaces: torch.nn.functional.normalize (line 162)
    # one program per rms_norm (or normalize) row: statistics pass, then normalise + store
    pid = tl.program_id(0)
    lanes = tl.arange(0, BLOCK)
    if IDX64:  # more than 2**31 elements: 64-bit addresses
        pid = pid.to(tl.int64)
        lanes = lanes.to(tl.int64)
    row = pid
    cnt = tl.zeros([BLOCK], dtype=tl.float32)
    mean = tl.zeros([BLOCK], dtype=tl.float32)
    m2 = tl.zeros([BLOCK], dtype=tl.float32)
    for r0 in range(0, M, BLOCK):
        r = r0 + lanes
        mask = r < M
        offs = row * M + r
        x = tl.load(v919_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        cnt += tl.where(mask, 1.0, 0.0)
        m2 += tl.where(mask, x * x, 0.0)
    tot = tl.sum(cnt, axis=0)
    gmean = tl.sum(cnt * mean, axis=0) / tot
    dm = tl.where(cnt > 0, mean - gmean, 0.0)
    var = tl.sum(m2 + cnt * dm * dm, axis=0) / tot
    rstd = 1.0 / tl.maximum(tl.sqrt(var * tot), 1e-12)
    for r0 in range(0, M, BLOCK):
        r = r0 + lanes
        mask = r < M
        offs = row * M + r
        x = tl.load(v919_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        y = x * rstd
        tl.store(v922_ptr + offs, y, mask=mask)


def sk185_run(v919):
    # replaces: torch.nn.functional.normalize (line 162)
    in922 = v919.shape
    in922_device = v919.device
    numel922 = math.prod(in922)
    m922 = math.prod(in922[3:])
    rows922 = numel922 // max(m922, 1)
    lay922 = ()
    out922 = tuple(in922)
    v922 = torch.empty(out922, device=in922_device, dtype=torch.float32)
    if rows922 * m922 > 0:
        sk185__norm_normalize_kernel1[(rows922,)](
            v919.contiguous(), v922, m922, *lay922, BLOCK=1024, IDX64=numel922 >= 2**31, num_warps=4)
    return v922


# ---- sk187 matmul_21: triton_gemm64x64x32_w4_s3_tf32x3 (builtin) ----
"""Subkernel matmul_21 (lines 162-162), builtin variant triton_gemm64x64x32_w4_s3_tf32x3.

Generated by MKEvolve's builtin proposer; sizes are read from the tensors at run time.
"""



@triton.jit
def sk187__gemm_matmul_kernel1(a_ptr, b_ptr, v925_ptr, M, N, K, stride_ab, stride_am, stride_ak,
        stride_bb, stride_bk, stride_bn, B1, stride_ab1, stride_bb1,
        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
        BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, IDX64: tl.constexpr):
    # replaces: torch.Tensor.matmul (line 162)
    # grouped program order: GROUP_M row tiles share each column tile in L2;
    # batches on the same grid axis (dim 1 of a grid allows only 65535)
    pid = tl.program_id(0)
    num_m = tl.cdiv(M, BLOCK_M)
    num_n = tl.cdiv(N, BLOCK_N)
    batch = pid // (num_m * num_n)
    pid = pid % (num_m * num_n)
    group = pid // (GROUP_M * num_n)
    first_m = group * GROUP_M
    group_size = tl.minimum(num_m - first_m, GROUP_M)
    pid_m = first_m + (pid % group_size)
    pid_n = (pid % (GROUP_M * num_n)) // group_size
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    if IDX64:  # an operand's storage or the result has more than 2**31 elements
        batch = batch.to(tl.int64)
        rm = rm.to(tl.int64)
        rn = rn.to(tl.int64)
        rk = rk.to(tl.int64)
    # a second batch dim (4-d: heads) of B1, each operand by its own strides
    b0 = batch // B1
    b1 = batch % B1
    a_base = a_ptr + b0 * stride_ab + b1 * stride_ab1
    b_base = b_ptr + b0 * stride_bb + b1 * stride_bb1
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        kk = k0 + rk
        a = tl.load(a_base + rm[:, None] * stride_am + kk[None, :] * stride_ak,
                    mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
        b = tl.load(b_base + kk[:, None] * stride_bk + rn[None, :] * stride_bn,
                    mask=(kk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(a, b, input_precision="tf32x3")
    offs = batch * M * N + rm[:, None] * N + rn[None, :]
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    tl.store(v925_ptr + offs, acc, mask=mask)


def sk187_run(v922, v924):
    # replaces: torch.Tensor.matmul (line 162)
    a925 = v922
    b925 = v924
    bat925, b1_925, m925, k925 = a925.shape
    if tuple(b925.shape[:2]) != (bat925, b1_925):
        raise ValueError("batch dims do not match")
    n925 = b925.shape[3]
    batch925 = bat925 * b1_925
    sab925, sab1_925, sam925, sak925 = a925.stride()
    sbb925, sbb1_925, sbk925, sbn925 = b925.stride()
    out925 = (bat925, b1_925, m925, n925)
    if k925 != (b925.shape[0] if False else b925.shape[-2]):
        raise ValueError("matrix shapes do not match")
    v925 = torch.empty(out925, device=a925.device, dtype=torch.float32)
    if m925 * n925 * batch925 > 0:
        grid = (triton.cdiv(m925, 64) * triton.cdiv(n925, 64) * batch925,)
        sk187__gemm_matmul_kernel1[grid](
            a925, b925, v925, m925, n925, k925, sab925, sam925, sak925, sbb925, sbk925, sbn925,
            b1_925, sab1_925, sbb1_925,
            BLOCK_M=64, BLOCK_N=64, BLOCK_K=32, GROUP_M=8,
            IDX64=max(a925.untyped_storage().nbytes() // 4,
                      b925.untyped_storage().nbytes() // 4, batch925 * m925 * n925) >= 2**31,
            num_warps=4, num_stages=3)
    return v925


# ---- sk195 linear_dropout_16: triton_gemm64x64x32_w4_s3_tf32x3_b1024_w4 (builtin) ----
"""Subkernel linear_dropout_16 (lines 69-289), builtin variant triton_gemm64x64x32_w4_s3_tf32x3_b1024_w4.

Generated by MKEvolve's builtin proposer; sizes are read from the tensors at run time.
"""



@triton.jit
def sk195__gemm_linear_kernel1(a_ptr, b_ptr, bias_ptr, epi_v951_ptr, epi_D0, epi_D1, epi_D2, M, N, K, stride_ab, stride_am, stride_ak,
        stride_bb, stride_bk, stride_bn, B1, stride_ab1, stride_bb1,
        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
        BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, IDX64: tl.constexpr):
    # replaces: torch.nn.functional.linear (line 184)
    # grouped program order: GROUP_M row tiles share each column tile in L2;
    # batches on the same grid axis (dim 1 of a grid allows only 65535)
    pid = tl.program_id(0)
    num_m = tl.cdiv(M, BLOCK_M)
    num_n = tl.cdiv(N, BLOCK_N)
    batch = pid // (num_m * num_n)
    pid = pid % (num_m * num_n)
    group = pid // (GROUP_M * num_n)
    first_m = group * GROUP_M
    group_size = tl.minimum(num_m - first_m, GROUP_M)
    pid_m = first_m + (pid % group_size)
    pid_n = (pid % (GROUP_M * num_n)) // group_size
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    if IDX64:  # an operand's storage or the result has more than 2**31 elements
        batch = batch.to(tl.int64)
        rm = rm.to(tl.int64)
        rn = rn.to(tl.int64)
        rk = rk.to(tl.int64)
    # a second batch dim (4-d: heads) of B1, each operand by its own strides
    b0 = batch // B1
    b1 = batch % B1
    a_base = a_ptr + b0 * stride_ab + b1 * stride_ab1
    b_base = b_ptr + b0 * stride_bb + b1 * stride_bb1
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        kk = k0 + rk
        a = tl.load(a_base + rm[:, None] * stride_am + kk[None, :] * stride_ak,
                    mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
        b = tl.load(b_base + kk[:, None] * stride_bk + rn[None, :] * stride_bn,
                    mask=(kk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(a, b, input_precision="tf32x3")
    acc += tl.load(bias_ptr + rn, mask=rn < N, other=0.0)[None, :]
    offs = batch * M * N + rm[:, None] * N + rn[None, :]
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    # fused epilogue
    v951 = acc  # dropout (line 185)
    tl.store(epi_v951_ptr + offs, v951, mask=mask)


def sk195_run(v949, layers_3_blocks_0_attn_proj_weight, layers_3_blocks_0_attn_proj_bias):
    # replaces: torch.nn.functional.linear (line 184)
    # replaces: torch.nn.functional.dropout (line 185)
    a950 = v949.contiguous()
    b950 = layers_3_blocks_0_attn_proj_weight
    b1_950, sab1_950, sbb1_950 = 1, 0, 0
    k950 = a950.shape[-1]
    m950 = a950.numel() // max(k950, 1)
    batch950, sab950, sam950, sak950 = 1, 0, k950, 1
    n950 = b950.shape[0]
    sbb950, sbk950, sbn950 = 0, b950.stride(1), b950.stride(0)
    out950 = tuple(a950.shape[:-1]) + (n950,)
    if k950 != (b950.shape[1] if True else b950.shape[-2]):
        raise ValueError("matrix shapes do not match")
    v951 = torch.empty(out950, device=a950.device, dtype=torch.float32)
    if m950 * n950 * batch950 > 0:
        grid = (triton.cdiv(m950, 64) * triton.cdiv(n950, 64) * batch950,)
        sk195__gemm_linear_kernel1[grid](
            a950, b950, layers_3_blocks_0_attn_proj_bias, v951, out950[0], out950[1], out950[2], m950, n950, k950, sab950, sam950, sak950, sbb950, sbk950, sbn950,
            b1_950, sab1_950, sbb1_950,
            BLOCK_M=64, BLOCK_N=64, BLOCK_K=32, GROUP_M=8,
            IDX64=max(a950.untyped_storage().nbytes() // 4,
                      b950.untyped_storage().nbytes() // 4, batch950 * m950 * n950) >= 2**31,
            num_warps=4, num_stages=3)
    # replaces: torch.Tensor.view (line 281)
    v952 = v951.view(-1, 7, 7, 768)
    # replaces: torch.Tensor.view (line 69)
    v953 = v952.view(10, 1, 1, 7, 7, -1)
    # replaces: torch.Tensor.permute (line 70)
    v954 = v953.permute(0, 1, 3, 2, 4, 5)
    # replaces: torch.Tensor.contiguous (line 70)
    v955 = v954.contiguous()
    # replaces: torch.Tensor.view (line 70)
    v956 = v955.view(10, 7, 7, -1)
    # replaces: torch.Tensor.view (line 289)
    v957 = v956.view(10, 49, 768)
    return v957


# ---- sk197 linear_gelu_dropout_11: triton_gemm64x64x32_w4_s3_tf32x3_b1024_w4 (builtin) ----
"""Subkernel linear_gelu_dropout_11 (lines 34-36), builtin variant triton_gemm64x64x32_w4_s3_tf32x3_b1024_w4.

Generated by MKEvolve's builtin proposer; sizes are read from the tensors at run time.
"""



@triton.jit
def sk197__gemm_linear_kernel1(a_ptr, b_ptr, bias_ptr, epi_v962_ptr, epi_D0, epi_D1, epi_D2, M, N, K, stride_ab, stride_am, stride_ak,
        stride_bb, stride_bk, stride_bn, B1, stride_ab1, stride_bb1,
        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
        BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, IDX64: tl.constexpr):
    # replaces: torch.nn.functional.linear (line 34)
    # grouped program order: GROUP_M row tiles share each column tile in L2;
    # batches on the same grid axis (dim 1 of a grid allows only 65535)
    pid = tl.program_id(0)
    num_m = tl.cdiv(M, BLOCK_M)
    num_n = tl.cdiv(N, BLOCK_N)
    batch = pid // (num_m * num_n)
    pid = pid % (num_m * num_n)
    group = pid // (GROUP_M * num_n)
    first_m = group * GROUP_M
    group_size = tl.minimum(num_m - first_m, GROUP_M)
    pid_m = first_m + (pid % group_size)
    pid_n = (pid % (GROUP_M * num_n)) // group_size
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    if IDX64:  # an operand's storage or the result has more than 2**31 elements
        batch = batch.to(tl.int64)
        rm = rm.to(tl.int64)
        rn = rn.to(tl.int64)
        rk = rk.to(tl.int64)
    # a second batch dim (4-d: heads) of B1, each operand by its own strides
    b0 = batch // B1
    b1 = batch % B1
    a_base = a_ptr + b0 * stride_ab + b1 * stride_ab1
    b_base = b_ptr + b0 * stride_bb + b1 * stride_bb1
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        kk = k0 + rk
        a = tl.load(a_base + rm[:, None] * stride_am + kk[None, :] * stride_ak,
                    mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
        b = tl.load(b_base + kk[:, None] * stride_bk + rn[None, :] * stride_bn,
                    mask=(kk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(a, b, input_precision="tf32x3")
    acc += tl.load(bias_ptr + rn, mask=rn < N, other=0.0)[None, :]
    offs = batch * M * N + rm[:, None] * N + rn[None, :]
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    # fused epilogue
    v961 = 0.5 * acc * (1.0 + tl.erf(acc * 0.7071067811865476))  # gelu (line 35)
    v962 = v961  # dropout (line 36)
    tl.store(epi_v962_ptr + offs, v962, mask=mask)


def sk197_run(v959, layers_3_blocks_0_mlp_fc1_weight, layers_3_blocks_0_mlp_fc1_bias):
    # replaces: torch.nn.functional.linear (line 34)
    # replaces: torch.nn.functional.gelu (line 35), torch.nn.functional.dropout (line 36)
    a960 = v959.contiguous()
    b960 = layers_3_blocks_0_mlp_fc1_weight
    b1_960, sab1_960, sbb1_960 = 1, 0, 0
    k960 = a960.shape[-1]
    m960 = a960.numel() // max(k960, 1)
    batch960, sab960, sam960, sak960 = 1, 0, k960, 1
    n960 = b960.shape[0]
    sbb960, sbk960, sbn960 = 0, b960.stride(1), b960.stride(0)
    out960 = tuple(a960.shape[:-1]) + (n960,)
    if k960 != (b960.shape[1] if True else b960.shape[-2]):
        raise ValueError("matrix shapes do not match")
    v962 = torch.empty(out960, device=a960.device, dtype=torch.float32)
    if m960 * n960 * batch960 > 0:
        grid = (triton.cdiv(m960, 64) * triton.cdiv(n960, 64) * batch960,)
        sk197__gemm_linear_kernel1[grid](
            a960, b960, layers_3_blocks_0_mlp_fc1_bias, v962, out960[0], out960[1], out960[2], m960, n960, k960, sab960, sam960, sak960, sbb960, sbk960, sbn960,
            b1_960, sab1_960, sbb1_960,
            BLOCK_M=64, BLOCK_N=64, BLOCK_K=32, GROUP_M=8,
            IDX64=max(a960.untyped_storage().nbytes() // 4,
                      b960.untyped_storage().nbytes() // 4, batch960 * m960 * n960) >= 2**31,
            num_warps=4, num_stages=3)
    return v962


# ---- sk198 linear_dropout_17: triton_gemm64x64x32_w4_s3_tf32x3_b1024_w4 (builtin) ----
"""Subkernel linear_dropout_17 (lines 37-38), builtin variant triton_gemm64x64x32_w4_s3_tf32x3_b1024_w4.

Generated by MKEvolve's builtin proposer; sizes are read from the tensors at run time.
"""



@triton.jit
def sk198__gemm_linear_kernel1(a_ptr, b_ptr, bias_ptr, epi_v964_ptr, epi_D0, epi_D1, epi_D2, M, N, K, stride_ab, stride_am, stride_ak,
        stride_bb, stride_bk, stride_bn, B1, stride_ab1, stride_bb1,
        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
        BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, IDX64: tl.constexpr):
    # replaces: torch.nn.functional.linear (line 37)
    # grouped program order: GROUP_M row tiles share each column tile in L2;
    # batches on the same grid axis (dim 1 of a grid allows only 65535)
    pid = tl.program_id(0)
    num_m = tl.cdiv(M, BLOCK_M)
    num_n = tl.cdiv(N, BLOCK_N)
    batch = pid // (num_m * num_n)
    pid = pid % (num_m * num_n)
    group = pid // (GROUP_M * num_n)
    first_m = group * GROUP_M
    group_size = tl.minimum(num_m - first_m, GROUP_M)
    pid_m = first_m + (pid % group_size)
    pid_n = (pid % (GROUP_M * num_n)) // group_size
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    if IDX64:  # an operand's storage or the result has more than 2**31 elements
        batch = batch.to(tl.int64)
        rm = rm.to(tl.int64)
        rn = rn.to(tl.int64)
        rk = rk.to(tl.int64)
    # a second batch dim (4-d: heads) of B1, each operand by its own strides
    b0 = batch // B1
    b1 = batch % B1
    a_base = a_ptr + b0 * stride_ab + b1 * stride_ab1
    b_base = b_ptr + b0 * stride_bb + b1 * stride_bb1
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        kk = k0 + rk
        a = tl.load(a_base + rm[:, None] * stride_am + kk[None, :] * stride_ak,
                    mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
        b = tl.load(b_base + kk[:, None] * stride_bk + rn[None, :] * stride_bn,
                    mask=(kk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(a, b, input_precision="tf32x3")
    acc += tl.load(bias_ptr + rn, mask=rn < N, other=0.0)[None, :]
    offs = batch * M * N + rm[:, None] * N + rn[None, :]
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    # fused epilogue
    v964 = acc  # dropout (line 38)
    tl.store(epi_v964_ptr + offs, v964, mask=mask)


def sk198_run(v962, layers_3_blocks_0_mlp_fc2_weight, layers_3_blocks_0_mlp_fc2_bias):
    # replaces: torch.nn.functional.linear (line 37)
    # replaces: torch.nn.functional.dropout (line 38)
    a963 = v962.contiguous()
    b963 = layers_3_blocks_0_mlp_fc2_weight
    b1_963, sab1_963, sbb1_963 = 1, 0, 0
    k963 = a963.shape[-1]
    m963 = a963.numel() // max(k963, 1)
    batch963, sab963, sam963, sak963 = 1, 0, k963, 1
    n963 = b963.shape[0]
    sbb963, sbk963, sbn963 = 0, b963.stride(1), b963.stride(0)
    out963 = tuple(a963.shape[:-1]) + (n963,)
    if k963 != (b963.shape[1] if True else b963.shape[-2]):
        raise ValueError("matrix shapes do not match")
    v964 = torch.empty(out963, device=a963.device, dtype=torch.float32)
    if m963 * n963 * batch963 > 0:
        grid = (triton.cdiv(m963, 64) * triton.cdiv(n963, 64) * batch963,)
        sk198__gemm_linear_kernel1[grid](
            a963, b963, layers_3_blocks_0_mlp_fc2_bias, v964, out963[0], out963[1], out963[2], m963, n963, k963, sab963, sam963, sak963, sbb963, sbk963, sbn963,
            b1_963, sab1_963, sbb1_963,
            BLOCK_M=64, BLOCK_N=64, BLOCK_K=32, GROUP_M=8,
            IDX64=max(a963.untyped_storage().nbytes() // 4,
                      b963.untyped_storage().nbytes() // 4, batch963 * m963 * n963) >= 2**31,
            num_warps=4, num_stages=3)
    return v964


# ---- sk199 layer_norm_add_14: triton_b1024_w4 (builtin) ----
"""Subkernel layer_norm_add_14 (lines 52-293), builtin variant triton_b1024_w4.

Generated by MKEvolve's builtin proposer; sizes are read from the tensors at run time.
"""



@triton.jit
def sk199__norm_layer_norm_kernel1(v964_ptr, w_ptr, b_ptr, epi_v959_ptr, epi_v966_ptr, epi_D0, epi_D1, epi_D2, M, BLOCK: tl.constexpr, IDX64: tl.constexpr):
    # replaces: torch.nn.functional.layer_norm (line 293)
    # one program per layer_norm row: statistics pass, then normalise + store
    pid = tl.program_id(0)
    lanes = tl.arange(0, BLOCK)
    if IDX64:  # more than 2**31 elements: 64-bit addresses
        pid = pid.to(tl.int64)
        lanes = lanes.to(tl.int64)
    row = pid
    cnt = tl.zeros([BLOCK], dtype=tl.float32)
    mean = tl.zeros([BLOCK], dtype=tl.float32)
    m2 = tl.zeros([BLOCK], dtype=tl.float32)
    for r0 in range(0, M, BLOCK):
        r = r0 + lanes
        mask = r < M
        offs = row * M + r
        x = tl.load(v964_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        cnt += tl.where(mask, 1.0, 0.0)
        delta = tl.where(mask, x - mean, 0.0)
        mean += delta / tl.maximum(cnt, 1.0)
        m2 += delta * tl.where(mask, x - mean, 0.0)
    tot = tl.sum(cnt, axis=0)
    gmean = tl.sum(cnt * mean, axis=0) / tot
    dm = tl.where(cnt > 0, mean - gmean, 0.0)
    var = tl.sum(m2 + cnt * dm * dm, axis=0) / tot
    rstd = 1.0 / tl.sqrt(var + 1e-05)
    for r0 in range(0, M, BLOCK):
        r = r0 + lanes
        mask = r < M
        offs = row * M + r
        x = tl.load(v964_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        y = (x - gmean) * rstd
        ch = r
        y = y * tl.load(w_ptr + ch, mask=mask, other=1.0)
        y = y + tl.load(b_ptr + ch, mask=mask, other=0.0)
        # fused epilogue
        epi_v959 = tl.load(epi_v959_ptr + offs, mask=mask, other=0)
        v966 = epi_v959 + y  # add (line 293)
        tl.store(epi_v966_ptr + offs, v966, mask=mask)


def sk199_run(v964, layers_3_blocks_0_norm2_weight, layers_3_blocks_0_norm2_bias, v959):
    # replaces: torch.nn.functional.layer_norm (line 293)
    # replaces: torch.Tensor.add (line 293)
    in965 = v964.shape
    in965_device = v964.device
    numel965 = math.prod(in965)
    m965 = math.prod(in965[2:])
    rows965 = numel965 // max(m965, 1)
    lay965 = ()
    out965 = tuple(in965)
    v966 = torch.empty(out965, device=in965_device, dtype=torch.float32)
    if rows965 * m965 > 0:
        sk199__norm_layer_norm_kernel1[(rows965,)](
            v964.contiguous(), layers_3_blocks_0_norm2_weight.contiguous(), layers_3_blocks_0_norm2_bias.contiguous(), v959.contiguous(), v966, out965[0], out965[1], out965[2], m965, *lay965, BLOCK=1024, IDX64=numel965 >= 2**31, num_warps=4)
    # replaces: torch.Tensor.view (line 265)
    v967 = v966.view(10, 7, 7, 768)
    # replaces: torch.Tensor.view (line 52)
    v968 = v967.view(10, 1, 7, 1, 7, 768)
    # replaces: torch.Tensor.permute (line 53)
    v969 = v968.permute(0, 1, 3, 2, 4, 5)
    # replaces: torch.Tensor.contiguous (line 53)
    v970 = v969.contiguous()
    # replaces: torch.Tensor.view (line 53)
    v971 = v970.view(-1, 7, 7, 768)
    # replaces: torch.Tensor.view (line 275)
    v972 = v971.view(-1, 49, 768)
    return v966, v972


# Tensors the forward makes from constants alone, made once per device and
# reused (nothing writes or returns them): no host-to-device copy per call,
# and the forward can be captured as a CUDA graph.
_MK_CONSTS: dict = {}


def _mk_const(key, make):
    t = _MK_CONSTS.get(key)
    if t is None:
        t = _MK_CONSTS[key] = make()
    return t


class ModelNew(Model):
    """The same module, composed of verified subkernels."""

    def forward(self, x):
        _mk_dev = x.device
        # conv2d — lines 433-433 — PyTorch reference
        v251 = F.conv2d(x, self.patch_embed.proj.weight, self.patch_embed.proj.bias, (4, 4), (0, 0), (1, 1), 1)
        v252 = v251.flatten(2)
        v253 = v252.transpose(1, 2)
        # layer_norm_dropout — lines 52-517 — triton_rows_b1024_w4
        v255, v261 = sk1_run(v253, self.patch_embed.norm.weight, self.patch_embed.norm.bias)
        # zeros_like_cat — lines 156-156 — PyTorch reference
        v262 = torch.zeros_like(self.layers[0].blocks[0].attn.v_bias, requires_grad=False)
        v263 = torch.cat((self.layers[0].blocks[0].attn.q_bias, v262, self.layers[0].blocks[0].attn.v_bias))
        # linear — lines 157-159 — PyTorch reference
        v264 = F.linear(input=v261, weight=self.layers[0].blocks[0].attn.qkv.weight, bias=v263)
        v265 = v264.reshape(640, 49, 3, 3, -1)
        v266 = v265.permute(2, 0, 3, 1, 4)
        v267 = torch.Tensor.__getitem__(v266, 0)
        v268 = torch.Tensor.__getitem__(v266, 1)
        v269 = torch.Tensor.__getitem__(v266, 2)
        # normalize — lines 162-162 — PyTorch reference
        v270 = F.normalize(v267, p=2.0, dim=-1, eps=1e-12, out=None)
        # normalize_2 — lines 162-162 — PyTorch reference
        v271 = F.normalize(v268, p=2.0, dim=-1, eps=1e-12, out=None)
        v272 = v271.transpose(-2, -1)
        # matmul — lines 162-162 — triton_gemm64x64x32_w4_s3_tf32x3
        v273 = sk6_run(v270, v272)
        # to — lines 163-163 — PyTorch reference
        v274 = self.layers[0].blocks[0].attn.logit_scale.to(_mk_dev)
        # tensor_log_clamp_exp — lines 163-164 — PyTorch reference
        v275 = _mk_const((24, torch.get_default_dtype(), _mk_dev), lambda: torch.tensor(1e+02, device=_mk_dev))
        v276 = torch.log(v275)
        v277 = torch.clamp(v274, max=v276)
        v278 = v277.exp()
        v279 = v273.mul(v278)
        # linear_relu — lines 166-166 — PyTorch reference
        v280 = F.linear(self.layers[0].blocks[0].attn.relative_coords_table, self.layers[0].blocks[0].attn.cpb_mlp[0].weight, self.layers[0].blocks[0].attn.cpb_mlp[0].bias)
        v281 = F.relu(v280, inplace=True)
        # linear_2 — lines 166-166 — PyTorch reference
        v282 = F.linear(v281, self.layers[0].blocks[0].attn.cpb_mlp[2].weight, None)
        v283 = v282.view(-1, 3)
        # index_sigmoid_mul_add — lines 167-179 — PyTorch reference
        v284 = self.layers[0].blocks[0].attn.relative_position_index.view(-1)
        v285 = torch.Tensor.__getitem__(v283, v284)
        v286 = v285.view(49, 49, -1)
        v287 = v286.permute(2, 0, 1)
        v288 = v287.contiguous()
        v289 = torch.sigmoid(v288)
        v290 = v289.mul(16)
        v291 = v290.unsqueeze(0)
        v292 = v279.add(v291)
        v293 = F.softmax(v292, dim=-1, _stacklevel=5, dtype=None)
        # dropout — lines 181-181 — PyTorch reference
        v294 = F.dropout(v293, p=0.0, training=True, inplace=False)
        # matmul_2 — lines 183-183 — PyTorch reference
        v295 = v294.matmul(v269)
        v296 = v295.transpose(1, 2)
        v297 = v296.reshape(640, 49, 96)
        # linear_dropout — lines 69-289 — triton_gemm128x128x32_w8_s3_tf32x3_b1024_w4
        v305 = sk14_run(v297, self.layers[0].blocks[0].attn.proj.weight, self.layers[0].blocks[0].attn.proj.bias)
        # layer_norm_add — lines 290-290 — triton_rows_b1024_w4
        v307 = sk15_run(v305, self.layers[0].blocks[0].norm1.weight, self.layers[0].blocks[0].norm1.bias, v255)
        # linear_gelu_dropout — lines 34-36 — triton_gemm64x64x32_w4_s3_tf32x3_b1024_w4
        v310 = sk16_run(v307, self.layers[0].blocks[0].mlp.fc1.weight, self.layers[0].blocks[0].mlp.fc1.bias)
        # linear_dropout_2 — lines 37-38 — PyTorch reference
        v311 = F.linear(v310, self.layers[0].blocks[0].mlp.fc2.weight, self.layers[0].blocks[0].mlp.fc2.bias)
        v312 = F.dropout(v311, p=0.0, training=True, inplace=False)
        # layer_norm_add_roll — lines 52-293 — triton_rows_b1024_w4
        v314, v321 = sk18_run(v312, self.layers[0].blocks[0].norm2.weight, self.layers[0].blocks[0].norm2.bias, v307)
        # zeros_like_cat_2 — lines 156-156 — PyTorch reference
        v322 = torch.zeros_like(self.layers[0].blocks[1].attn.v_bias, requires_grad=False)
        v323 = torch.cat((self.layers[0].blocks[1].attn.q_bias, v322, self.layers[0].blocks[1].attn.v_bias))
        # linear_3 — lines 157-159 — PyTorch reference
        v324 = F.linear(input=v321, weight=self.layers[0].blocks[1].attn.qkv.weight, bias=v323)
        v325 = v324.reshape(640, 49, 3, 3, -1)
        v326 = v325.permute(2, 0, 3, 1, 4)
        v327 = torch.Tensor.__getitem__(v326, 0)
        v328 = torch.Tensor.__getitem__(v326, 1)
        v329 = torch.Tensor.__getitem__(v326, 2)
        # normalize_3 — lines 162-162 — PyTorch reference
        v330 = F.normalize(v327, p=2.0, dim=-1, eps=1e-12, out=None)
        # normalize_4 — lines 162-162 — PyTorch reference
        v331 = F.normalize(v328, p=2.0, dim=-1, eps=1e-12, out=None)
        v332 = v331.transpose(-2, -1)
        # matmul_3 — lines 162-162 — triton_gemm64x64x32_w4_s3_tf32x3
        v333 = sk6_run(v330, v332)
        # to_2 — lines 163-163 — PyTorch reference
        v334 = self.layers[0].blocks[1].attn.logit_scale.to(_mk_dev)
        # tensor_log_clamp_exp_2 — lines 163-164 — PyTorch reference
        v335 = _mk_const((84, torch.get_default_dtype(), _mk_dev), lambda: torch.tensor(1e+02, device=_mk_dev))
        v336 = torch.log(v335)
        v337 = torch.clamp(v334, max=v336)
        v338 = v337.exp()
        v339 = v333.mul(v338)
        # linear_relu_2 — lines 166-166 — PyTorch reference
        v340 = F.linear(self.layers[0].blocks[1].attn.relative_coords_table, self.layers[0].blocks[1].attn.cpb_mlp[0].weight, self.layers[0].blocks[1].attn.cpb_mlp[0].bias)
        v341 = F.relu(v340, inplace=True)
        # linear_4 — lines 166-166 — PyTorch reference
        v342 = F.linear(v341, self.layers[0].blocks[1].attn.cpb_mlp[2].weight, None)
        v343 = v342.view(-1, 3)
        # index_sigmoid_mul_add_2 — lines 167-175 — PyTorch reference
        v344 = self.layers[0].blocks[1].attn.relative_position_index.view(-1)
        v345 = torch.Tensor.__getitem__(v343, v344)
        v346 = v345.view(49, 49, -1)
        v347 = v346.permute(2, 0, 1)
        v348 = v347.contiguous()
        v349 = torch.sigmoid(v348)
        v350 = v349.mul(16)
        v351 = v350.unsqueeze(0)
        v352 = v339.add(v351)
        v353 = v352.view(10, 64, 3, 49, 49)
        # add_softmax — lines 175-177 — PyTorch reference
        v354 = self.layers[0].blocks[1].attn_mask.unsqueeze(1)
        v355 = v354.unsqueeze(0)
        v356 = v353.add(v355)
        v357 = v356.view(-1, 3, 49, 49)
        v358 = F.softmax(v357, dim=-1, _stacklevel=5, dtype=None)
        # dropout_2 — lines 181-181 — PyTorch reference
        v359 = F.dropout(v358, p=0.0, training=True, inplace=False)
        # matmul_4 — lines 183-183 — PyTorch reference
        v360 = v359.matmul(v329)
        v361 = v360.transpose(1, 2)
        v362 = v361.reshape(640, 49, 96)
        # linear_dropout_roll — lines 69-289 — triton_gemm128x128x32_w8_s3_tf32x3_b1024_w4
        v371 = sk32_run(v362, self.layers[0].blocks[1].attn.proj.weight, self.layers[0].blocks[1].attn.proj.bias)
        # layer_norm_add_2 — lines 290-290 — triton_rows_b1024_w4
        v373 = sk15_run(v371, self.layers[0].blocks[1].norm1.weight, self.layers[0].blocks[1].norm1.bias, v314)
        # linear_gelu_dropout_2 — lines 34-36 — triton_gemm64x64x32_w4_s3_tf32x3_b1024_w4
        v376 = sk16_run(v373, self.layers[0].blocks[1].mlp.fc1.weight, self.layers[0].blocks[1].mlp.fc1.bias)
        # linear_dropout_3 — lines 37-38 — PyTorch reference
        v377 = F.linear(v376, self.layers[0].blocks[1].mlp.fc2.weight, self.layers[0].blocks[1].mlp.fc2.bias)
        v378 = F.dropout(v377, p=0.0, training=True, inplace=False)
        # layer_norm_add_cat — lines 293-330 — triton_b1024_w4
        v387 = sk36_run(v378, self.layers[0].blocks[1].norm2.weight, self.layers[0].blocks[1].norm2.bias, v373)
        # linear_5 — lines 332-332 — PyTorch reference
        v388 = F.linear(v387, self.layers[0].downsample.reduction.weight, None)
        # layer_norm — lines 52-333 — triton_b1024_w4
        v389, v395 = sk38_run(v388, self.layers[0].downsample.norm.weight, self.layers[0].downsample.norm.bias)
        # zeros_like_cat_3 — lines 156-156 — PyTorch reference
        v396 = torch.zeros_like(self.layers[1].blocks[0].attn.v_bias, requires_grad=False)
        v397 = torch.cat((self.layers[1].blocks[0].attn.q_bias, v396, self.layers[1].blocks[0].attn.v_bias))
        # linear_6 — lines 157-159 — triton_gemm64x64x32_w4_s3_tf32x3
        v401, v402, v403 = sk40_run(v395, self.layers[1].blocks[0].attn.qkv.weight, v397)
        # normalize_5 — lines 162-162 — PyTorch reference
        v404 = F.normalize(v401, p=2.0, dim=-1, eps=1e-12, out=None)
        # normalize_6 — lines 162-162 — PyTorch reference
        v405 = F.normalize(v402, p=2.0, dim=-1, eps=1e-12, out=None)
        v406 = v405.transpose(-2, -1)
        # matmul_5 — lines 162-162 — triton_gemm64x64x32_w4_s3_tf32x3
        v407 = sk43_run(v404, v406)
        # to_3 — lines 163-163 — PyTorch reference
        v408 = self.layers[1].blocks[0].attn.logit_scale.to(_mk_dev)
        # tensor_log_clamp_exp_3 — lines 163-164 — PyTorch reference
        v409 = _mk_const((158, torch.get_default_dtype(), _mk_dev), lambda: torch.tensor(1e+02, device=_mk_dev))
        v410 = torch.log(v409)
        v411 = torch.clamp(v408, max=v410)
        v412 = v411.exp()
        v413 = v407.mul(v412)
        # linear_relu_3 — lines 166-166 — PyTorch reference
        v414 = F.linear(self.layers[1].blocks[0].attn.relative_coords_table, self.layers[1].blocks[0].attn.cpb_mlp[0].weight, self.layers[1].blocks[0].attn.cpb_mlp[0].bias)
        v415 = F.relu(v414, inplace=True)
        # linear_7 — lines 166-166 — PyTorch reference
        v416 = F.linear(v415, self.layers[1].blocks[0].attn.cpb_mlp[2].weight, None)
        v417 = v416.view(-1, 6)
        # index_sigmoid_mul_add_3 — lines 167-179 — PyTorch reference
        v418 = self.layers[1].blocks[0].attn.relative_position_index.view(-1)
        v419 = torch.Tensor.__getitem__(v417, v418)
        v420 = v419.view(49, 49, -1)
        v421 = v420.permute(2, 0, 1)
        v422 = v421.contiguous()
        v423 = torch.sigmoid(v422)
        v424 = v423.mul(16)
        v425 = v424.unsqueeze(0)
        v426 = v413.add(v425)
        v427 = F.softmax(v426, dim=-1, _stacklevel=5, dtype=None)
        # dropout_3 — lines 181-181 — PyTorch reference
        v428 = F.dropout(v427, p=0.0, training=True, inplace=False)
        # matmul_6 — lines 183-183 — PyTorch reference
        v429 = v428.matmul(v403)
        v430 = v429.transpose(1, 2)
        v431 = v430.reshape(160, 49, 192)
        # linear_dropout_4 — lines 69-289 — triton_gemm128x128x32_w8_s3_tf32x3_b1024_w4
        v439 = sk51_run(v431, self.layers[1].blocks[0].attn.proj.weight, self.layers[1].blocks[0].attn.proj.bias)
        # layer_norm_add_3 — lines 290-290 — PyTorch reference
        v440 = F.layer_norm(v439, (192,), weight=self.layers[1].blocks[0].norm1.weight, bias=self.layers[1].blocks[0].norm1.bias, eps=1e-05)
        v441 = v389.add(v440)
        # linear_gelu_dropout_3 — lines 34-36 — triton_gemm128x128x32_w8_s3_tf32x3_b1024_w4
        v444 = sk53_run(v441, self.layers[1].blocks[0].mlp.fc1.weight, self.layers[1].blocks[0].mlp.fc1.bias)
        # linear_dropout_5 — lines 37-38 — triton_gemm64x64x32_w4_s3_tf32x3_b1024_w4
        v446 = sk54_run(v444, self.layers[1].blocks[0].mlp.fc2.weight, self.layers[1].blocks[0].mlp.fc2.bias)
        # layer_norm_add_roll_2 — lines 52-293 — triton_b1024_w4
        v448, v455 = sk55_run(v446, self.layers[1].blocks[0].norm2.weight, self.layers[1].blocks[0].norm2.bias, v441)
        # zeros_like_cat_4 — lines 156-156 — PyTorch reference
        v456 = torch.zeros_like(self.layers[1].blocks[1].attn.v_bias, requires_grad=False)
        v457 = torch.cat((self.layers[1].blocks[1].attn.q_bias, v456, self.layers[1].blocks[1].attn.v_bias))
        # linear_8 — lines 157-159 — triton_gemm64x64x32_w4_s3_tf32x3
        v461, v462, v463 = sk40_run(v455, self.layers[1].blocks[1].attn.qkv.weight, v457)
        # normalize_7 — lines 162-162 — PyTorch reference
        v464 = F.normalize(v461, p=2.0, dim=-1, eps=1e-12, out=None)
        # normalize_8 — lines 162-162 — PyTorch reference
        v465 = F.normalize(v462, p=2.0, dim=-1, eps=1e-12, out=None)
        v466 = v465.transpose(-2, -1)
        # matmul_7 — lines 162-162 — triton_gemm64x64x32_w4_s3_tf32x3
        v467 = sk43_run(v464, v466)
        # to_4 — lines 163-163 — PyTorch reference
        v468 = self.layers[1].blocks[1].attn.logit_scale.to(_mk_dev)
        # tensor_log_clamp_exp_4 — lines 163-164 — PyTorch reference
        v469 = _mk_const((218, torch.get_default_dtype(), _mk_dev), lambda: torch.tensor(1e+02, device=_mk_dev))
        v470 = torch.log(v469)
        v471 = torch.clamp(v468, max=v470)
        v472 = v471.exp()
        v473 = v467.mul(v472)
        # linear_relu_4 — lines 166-166 — PyTorch reference
        v474 = F.linear(self.layers[1].blocks[1].attn.relative_coords_table, self.layers[1].blocks[1].attn.cpb_mlp[0].weight, self.layers[1].blocks[1].attn.cpb_mlp[0].bias)
        v475 = F.relu(v474, inplace=True)
        # linear_9 — lines 166-166 — PyTorch reference
        v476 = F.linear(v475, self.layers[1].blocks[1].attn.cpb_mlp[2].weight, None)
        v477 = v476.view(-1, 6)
        # index_sigmoid_mul_add_4 — lines 167-175 — PyTorch reference
        v478 = self.layers[1].blocks[1].attn.relative_position_index.view(-1)
        v479 = torch.Tensor.__getitem__(v477, v478)
        v480 = v479.view(49, 49, -1)
        v481 = v480.permute(2, 0, 1)
        v482 = v481.contiguous()
        v483 = torch.sigmoid(v482)
        v484 = v483.mul(16)
        v485 = v484.unsqueeze(0)
        v486 = v473.add(v485)
        v487 = v486.view(10, 16, 6, 49, 49)
        # add_softmax_2 — lines 175-177 — PyTorch reference
        v488 = self.layers[1].blocks[1].attn_mask.unsqueeze(1)
        v489 = v488.unsqueeze(0)
        v490 = v487.add(v489)
        v491 = v490.view(-1, 6, 49, 49)
        v492 = F.softmax(v491, dim=-1, _stacklevel=5, dtype=None)
        # dropout_4 — lines 181-181 — PyTorch reference
        v493 = F.dropout(v492, p=0.0, training=True, inplace=False)
        # matmul_8 — lines 183-183 — PyTorch reference
        v494 = v493.matmul(v463)
        v495 = v494.transpose(1, 2)
        v496 = v495.reshape(160, 49, 192)
        # linear_dropout_roll_2 — lines 69-289 — triton_gemm64x64x32_w4_s3_tf32x3_b1024_w4
        v505 = sk69_run(v496, self.layers[1].blocks[1].attn.proj.weight, self.layers[1].blocks[1].attn.proj.bias)
        # layer_norm_add_4 — lines 290-290 — PyTorch reference
        v506 = F.layer_norm(v505, (192,), weight=self.layers[1].blocks[1].norm1.weight, bias=self.layers[1].blocks[1].norm1.bias, eps=1e-05)
        v507 = v448.add(v506)
        # linear_gelu_dropout_4 — lines 34-36 — triton_gemm128x128x32_w8_s3_tf32x3_b1024_w4
        v510 = sk53_run(v507, self.layers[1].blocks[1].mlp.fc1.weight, self.layers[1].blocks[1].mlp.fc1.bias)
        # linear_dropout_6 — lines 37-38 — triton_gemm64x64x32_w4_s3_tf32x3_b1024_w4
        v512 = sk54_run(v510, self.layers[1].blocks[1].mlp.fc2.weight, self.layers[1].blocks[1].mlp.fc2.bias)
        # layer_norm_add_cat_2 — lines 293-330 — triton_b1024_w4
        v521 = sk73_run(v512, self.layers[1].blocks[1].norm2.weight, self.layers[1].blocks[1].norm2.bias, v507)
        # linear_10 — lines 332-332 — PyTorch reference
        v522 = F.linear(v521, self.layers[1].downsample.reduction.weight, None)
        # layer_norm_2 — lines 52-333 — triton_b1024_w4
        v523, v529 = sk75_run(v522, self.layers[1].downsample.norm.weight, self.layers[1].downsample.norm.bias)
        # zeros_like_cat_5 — lines 156-156 — PyTorch reference
        v530 = torch.zeros_like(self.layers[2].blocks[0].attn.v_bias, requires_grad=False)
        v531 = torch.cat((self.layers[2].blocks[0].attn.q_bias, v530, self.layers[2].blocks[0].attn.v_bias))
        # linear_11 — lines 157-159 — PyTorch reference
        v532 = F.linear(input=v529, weight=self.layers[2].blocks[0].attn.qkv.weight, bias=v531)
        v533 = v532.reshape(40, 49, 3, 12, -1)
        v534 = v533.permute(2, 0, 3, 1, 4)
        v535 = torch.Tensor.__getitem__(v534, 0)
        v536 = torch.Tensor.__getitem__(v534, 1)
        v537 = torch.Tensor.__getitem__(v534, 2)
        # normalize_9 — lines 162-162 — PyTorch reference
        v538 = F.normalize(v535, p=2.0, dim=-1, eps=1e-12, out=None)
        # normalize_10 — lines 162-162 — PyTorch reference
        v539 = F.normalize(v536, p=2.0, dim=-1, eps=1e-12, out=None)
        v540 = v539.transpose(-2, -1)
        # matmul_9 — lines 162-162 — triton_gemm64x64x32_w4_s3_tf32x3
        v541 = sk80_run(v538, v540)
        # to_5 — lines 163-163 — PyTorch reference
        v542 = self.layers[2].blocks[0].attn.logit_scale.to(_mk_dev)
        # tensor_log_clamp_exp_5 — lines 163-164 — PyTorch reference
        v543 = _mk_const((292, torch.get_default_dtype(), _mk_dev), lambda: torch.tensor(1e+02, device=_mk_dev))
        v544 = torch.log(v543)
        v545 = torch.clamp(v542, max=v544)
        v546 = v545.exp()
        v547 = v541.mul(v546)
        # linear_relu_5 — lines 166-166 — PyTorch reference
        v548 = F.linear(self.layers[2].blocks[0].attn.relative_coords_table, self.layers[2].blocks[0].attn.cpb_mlp[0].weight, self.layers[2].blocks[0].attn.cpb_mlp[0].bias)
        v549 = F.relu(v548, inplace=True)
        # linear_12 — lines 166-166 — PyTorch reference
        v550 = F.linear(v549, self.layers[2].blocks[0].attn.cpb_mlp[2].weight, None)
        v551 = v550.view(-1, 12)
        # index_sigmoid_mul_add_5 — lines 167-179 — PyTorch reference
        v552 = self.layers[2].blocks[0].attn.relative_position_index.view(-1)
        v553 = torch.Tensor.__getitem__(v551, v552)
        v554 = v553.view(49, 49, -1)
        v555 = v554.permute(2, 0, 1)
        v556 = v555.contiguous()
        v557 = torch.sigmoid(v556)
        v558 = v557.mul(16)
        v559 = v558.unsqueeze(0)
        v560 = v547.add(v559)
        v561 = F.softmax(v560, dim=-1, _stacklevel=5, dtype=None)
        # dropout_5 — lines 181-181 — PyTorch reference
        v562 = F.dropout(v561, p=0.0, training=True, inplace=False)
        # matmul_10 — lines 183-183 — PyTorch reference
        v563 = v562.matmul(v537)
        v564 = v563.transpose(1, 2)
        v565 = v564.reshape(40, 49, 384)
        # linear_dropout_7 — lines 69-289 — triton_gemm64x64x32_w4_s3_tf32x3_b1024_w4
        v573 = sk88_run(v565, self.layers[2].blocks[0].attn.proj.weight, self.layers[2].blocks[0].attn.proj.bias)
        # layer_norm_add_5 — lines 290-290 — PyTorch reference
        v574 = F.layer_norm(v573, (384,), weight=self.layers[2].blocks[0].norm1.weight, bias=self.layers[2].blocks[0].norm1.bias, eps=1e-05)
        v575 = v523.add(v574)
        # linear_gelu_dropout_5 — lines 34-36 — triton_gemm64x64x32_w4_s3_tf32x3_b1024_w4
        v578 = sk90_run(v575, self.layers[2].blocks[0].mlp.fc1.weight, self.layers[2].blocks[0].mlp.fc1.bias)
        # linear_dropout_8 — lines 37-38 — triton_gemm64x64x32_w4_s3_tf32x3_b1024_w4
        v580 = sk91_run(v578, self.layers[2].blocks[0].mlp.fc2.weight, self.layers[2].blocks[0].mlp.fc2.bias)
        # layer_norm_add_roll_3 — lines 52-293 — triton_b1024_w4
        v582, v589 = sk92_run(v580, self.layers[2].blocks[0].norm2.weight, self.layers[2].blocks[0].norm2.bias, v575)
        # zeros_like_cat_6 — lines 156-156 — PyTorch reference
        v590 = torch.zeros_like(self.layers[2].blocks[1].attn.v_bias, requires_grad=False)
        v591 = torch.cat((self.layers[2].blocks[1].attn.q_bias, v590, self.layers[2].blocks[1].attn.v_bias))
        # linear_13 — lines 157-159 — PyTorch reference
        v592 = F.linear(input=v589, weight=self.layers[2].blocks[1].attn.qkv.weight, bias=v591)
        v593 = v592.reshape(40, 49, 3, 12, -1)
        v594 = v593.permute(2, 0, 3, 1, 4)
        v595 = torch.Tensor.__getitem__(v594, 0)
        v596 = torch.Tensor.__getitem__(v594, 1)
        v597 = torch.Tensor.__getitem__(v594, 2)
        # normalize_11 — lines 162-162 — PyTorch reference
        v598 = F.normalize(v595, p=2.0, dim=-1, eps=1e-12, out=None)
        # normalize_12 — lines 162-162 — PyTorch reference
        v599 = F.normalize(v596, p=2.0, dim=-1, eps=1e-12, out=None)
        v600 = v599.transpose(-2, -1)
        # matmul_11 — lines 162-162 — triton_gemm64x64x32_w4_s3_tf32x3
        v601 = sk80_run(v598, v600)
        # to_6 — lines 163-163 — PyTorch reference
        v602 = self.layers[2].blocks[1].attn.logit_scale.to(_mk_dev)
        # tensor_log_clamp_exp_6 — lines 163-164 — PyTorch reference
        v603 = _mk_const((352, torch.get_default_dtype(), _mk_dev), lambda: torch.tensor(1e+02, device=_mk_dev))
        v604 = torch.log(v603)
        v605 = torch.clamp(v602, max=v604)
        v606 = v605.exp()
        v607 = v601.mul(v606)
        # linear_relu_6 — lines 166-166 — PyTorch reference
        v608 = F.linear(self.layers[2].blocks[1].attn.relative_coords_table, self.layers[2].blocks[1].attn.cpb_mlp[0].weight, self.layers[2].blocks[1].attn.cpb_mlp[0].bias)
        v609 = F.relu(v608, inplace=True)
        # linear_14 — lines 166-166 — PyTorch reference
        v610 = F.linear(v609, self.layers[2].blocks[1].attn.cpb_mlp[2].weight, None)
        v611 = v610.view(-1, 12)
        # index_sigmoid_mul_add_6 — lines 167-175 — PyTorch reference
        v612 = self.layers[2].blocks[1].attn.relative_position_index.view(-1)
        v613 = torch.Tensor.__getitem__(v611, v612)
        v614 = v613.view(49, 49, -1)
        v615 = v614.permute(2, 0, 1)
        v616 = v615.contiguous()
        v617 = torch.sigmoid(v616)
        v618 = v617.mul(16)
        v619 = v618.unsqueeze(0)
        v620 = v607.add(v619)
        v621 = v620.view(10, 4, 12, 49, 49)
        # add_softmax_3 — lines 175-177 — PyTorch reference
        v622 = self.layers[2].blocks[1].attn_mask.unsqueeze(1)
        v623 = v622.unsqueeze(0)
        v624 = v621.add(v623)
        v625 = v624.view(-1, 12, 49, 49)
        v626 = F.softmax(v625, dim=-1, _stacklevel=5, dtype=None)
        # dropout_6 — lines 181-181 — PyTorch reference
        v627 = F.dropout(v626, p=0.0, training=True, inplace=False)
        # matmul_12 — lines 183-183 — PyTorch reference
        v628 = v627.matmul(v597)
        v629 = v628.transpose(1, 2)
        v630 = v629.reshape(40, 49, 384)
        # linear_dropout_roll_3 — lines 69-289 — triton_gemm128x128x32_w8_s3_tf32x3_b1024_w4
        v639 = sk106_run(v630, self.layers[2].blocks[1].attn.proj.weight, self.layers[2].blocks[1].attn.proj.bias)
        # layer_norm_add_6 — lines 290-290 — PyTorch reference
        v640 = F.layer_norm(v639, (384,), weight=self.layers[2].blocks[1].norm1.weight, bias=self.layers[2].blocks[1].norm1.bias, eps=1e-05)
        v641 = v582.add(v640)
        # linear_gelu_dropout_6 — lines 34-36 — triton_gemm64x64x32_w4_s3_tf32x3_b1024_w4
        v644 = sk90_run(v641, self.layers[2].blocks[1].mlp.fc1.weight, self.layers[2].blocks[1].mlp.fc1.bias)
        # linear_dropout_9 — lines 37-38 — triton_gemm64x64x32_w4_s3_tf32x3_b1024_w4
        v646 = sk91_run(v644, self.layers[2].blocks[1].mlp.fc2.weight, self.layers[2].blocks[1].mlp.fc2.bias)
        # layer_norm_add_7 — lines 52-293 — triton_b1024_w4
        v648, v654 = sk110_run(v646, self.layers[2].blocks[1].norm2.weight, self.layers[2].blocks[1].norm2.bias, v641)
        # zeros_like_cat_7 — lines 156-156 — PyTorch reference
        v655 = torch.zeros_like(self.layers[2].blocks[2].attn.v_bias, requires_grad=False)
        v656 = torch.cat((self.layers[2].blocks[2].attn.q_bias, v655, self.layers[2].blocks[2].attn.v_bias))
        # linear_15 — lines 157-159 — PyTorch reference
        v657 = F.linear(input=v654, weight=self.layers[2].blocks[2].attn.qkv.weight, bias=v656)
        v658 = v657.reshape(40, 49, 3, 12, -1)
        v659 = v658.permute(2, 0, 3, 1, 4)
        v660 = torch.Tensor.__getitem__(v659, 0)
        v661 = torch.Tensor.__getitem__(v659, 1)
        v662 = torch.Tensor.__getitem__(v659, 2)
        # normalize_13 — lines 162-162 — PyTorch reference
        v663 = F.normalize(v660, p=2.0, dim=-1, eps=1e-12, out=None)
        # normalize_14 — lines 162-162 — PyTorch reference
        v664 = F.normalize(v661, p=2.0, dim=-1, eps=1e-12, out=None)
        v665 = v664.transpose(-2, -1)
        # matmul_13 — lines 162-162 — triton_gemm64x64x32_w4_s3_tf32x3
        v666 = sk80_run(v663, v665)
        # to_7 — lines 163-163 — PyTorch reference
        v667 = self.layers[2].blocks[2].attn.logit_scale.to(_mk_dev)
        # tensor_log_clamp_exp_7 — lines 163-164 — PyTorch reference
        v668 = _mk_const((417, torch.get_default_dtype(), _mk_dev), lambda: torch.tensor(1e+02, device=_mk_dev))
        v669 = torch.log(v668)
        v670 = torch.clamp(v667, max=v669)
        v671 = v670.exp()
        v672 = v666.mul(v671)
        # linear_relu_7 — lines 166-166 — PyTorch reference
        v673 = F.linear(self.layers[2].blocks[2].attn.relative_coords_table, self.layers[2].blocks[2].attn.cpb_mlp[0].weight, self.layers[2].blocks[2].attn.cpb_mlp[0].bias)
        v674 = F.relu(v673, inplace=True)
        # linear_16 — lines 166-166 — PyTorch reference
        v675 = F.linear(v674, self.layers[2].blocks[2].attn.cpb_mlp[2].weight, None)
        v676 = v675.view(-1, 12)
        # index_sigmoid_mul_add_7 — lines 167-179 — PyTorch reference
        v677 = self.layers[2].blocks[2].attn.relative_position_index.view(-1)
        v678 = torch.Tensor.__getitem__(v676, v677)
        v679 = v678.view(49, 49, -1)
        v680 = v679.permute(2, 0, 1)
        v681 = v680.contiguous()
        v682 = torch.sigmoid(v681)
        v683 = v682.mul(16)
        v684 = v683.unsqueeze(0)
        v685 = v672.add(v684)
        v686 = F.softmax(v685, dim=-1, _stacklevel=5, dtype=None)
        # dropout_7 — lines 181-181 — PyTorch reference
        v687 = F.dropout(v686, p=0.0, training=True, inplace=False)
        # matmul_14 — lines 183-183 — PyTorch reference
        v688 = v687.matmul(v662)
        v689 = v688.transpose(1, 2)
        v690 = v689.reshape(40, 49, 384)
        # linear_dropout_10 — lines 69-289 — triton_gemm64x64x32_w4_s3_tf32x3_b1024_w4
        v698 = sk88_run(v690, self.layers[2].blocks[2].attn.proj.weight, self.layers[2].blocks[2].attn.proj.bias)
        # layer_norm_add_8 — lines 290-290 — PyTorch reference
        v699 = F.layer_norm(v698, (384,), weight=self.layers[2].blocks[2].norm1.weight, bias=self.layers[2].blocks[2].norm1.bias, eps=1e-05)
        v700 = v648.add(v699)
        # linear_gelu_dropout_7 — lines 34-36 — triton_gemm64x64x32_w4_s3_tf32x3_b1024_w4
        v703 = sk90_run(v700, self.layers[2].blocks[2].mlp.fc1.weight, self.layers[2].blocks[2].mlp.fc1.bias)
        # linear_dropout_11 — lines 37-38 — triton_gemm64x64x32_w4_s3_tf32x3_b1024_w4
        v705 = sk91_run(v703, self.layers[2].blocks[2].mlp.fc2.weight, self.layers[2].blocks[2].mlp.fc2.bias)
        # layer_norm_add_roll_4 — lines 52-293 — triton_b1024_w4
        v707, v714 = sk92_run(v705, self.layers[2].blocks[2].norm2.weight, self.layers[2].blocks[2].norm2.bias, v700)
        # zeros_like_cat_8 — lines 156-156 — PyTorch reference
        v715 = torch.zeros_like(self.layers[2].blocks[3].attn.v_bias, requires_grad=False)
        v716 = torch.cat((self.layers[2].blocks[3].attn.q_bias, v715, self.layers[2].blocks[3].attn.v_bias))
        # linear_17 — lines 157-159 — PyTorch reference
        v717 = F.linear(input=v714, weight=self.layers[2].blocks[3].attn.qkv.weight, bias=v716)
        v718 = v717.reshape(40, 49, 3, 12, -1)
        v719 = v718.permute(2, 0, 3, 1, 4)
        v720 = torch.Tensor.__getitem__(v719, 0)
        v721 = torch.Tensor.__getitem__(v719, 1)
        v722 = torch.Tensor.__getitem__(v719, 2)
        # normalize_15 — lines 162-162 — PyTorch reference
        v723 = F.normalize(v720, p=2.0, dim=-1, eps=1e-12, out=None)
        # normalize_16 — lines 162-162 — PyTorch reference
        v724 = F.normalize(v721, p=2.0, dim=-1, eps=1e-12, out=None)
        v725 = v724.transpose(-2, -1)
        # matmul_15 — lines 162-162 — triton_gemm64x64x32_w4_s3_tf32x3
        v726 = sk80_run(v723, v725)
        # to_8 — lines 163-163 — PyTorch reference
        v727 = self.layers[2].blocks[3].attn.logit_scale.to(_mk_dev)
        # tensor_log_clamp_exp_8 — lines 163-164 — PyTorch reference
        v728 = _mk_const((477, torch.get_default_dtype(), _mk_dev), lambda: torch.tensor(1e+02, device=_mk_dev))
        v729 = torch.log(v728)
        v730 = torch.clamp(v727, max=v729)
        v731 = v730.exp()
        v732 = v726.mul(v731)
        # linear_relu_8 — lines 166-166 — PyTorch reference
        v733 = F.linear(self.layers[2].blocks[3].attn.relative_coords_table, self.layers[2].blocks[3].attn.cpb_mlp[0].weight, self.layers[2].blocks[3].attn.cpb_mlp[0].bias)
        v734 = F.relu(v733, inplace=True)
        # linear_18 — lines 166-166 — PyTorch reference
        v735 = F.linear(v734, self.layers[2].blocks[3].attn.cpb_mlp[2].weight, None)
        v736 = v735.view(-1, 12)
        # index_sigmoid_mul_add_8 — lines 167-175 — PyTorch reference
        v737 = self.layers[2].blocks[3].attn.relative_position_index.view(-1)
        v738 = torch.Tensor.__getitem__(v736, v737)
        v739 = v738.view(49, 49, -1)
        v740 = v739.permute(2, 0, 1)
        v741 = v740.contiguous()
        v742 = torch.sigmoid(v741)
        v743 = v742.mul(16)
        v744 = v743.unsqueeze(0)
        v745 = v732.add(v744)
        v746 = v745.view(10, 4, 12, 49, 49)
        # add_softmax_4 — lines 175-177 — PyTorch reference
        v747 = self.layers[2].blocks[3].attn_mask.unsqueeze(1)
        v748 = v747.unsqueeze(0)
        v749 = v746.add(v748)
        v750 = v749.view(-1, 12, 49, 49)
        v751 = F.softmax(v750, dim=-1, _stacklevel=5, dtype=None)
        # dropout_8 — lines 181-181 — PyTorch reference
        v752 = F.dropout(v751, p=0.0, training=True, inplace=False)
        # matmul_16 — lines 183-183 — PyTorch reference
        v753 = v752.matmul(v722)
        v754 = v753.transpose(1, 2)
        v755 = v754.reshape(40, 49, 384)
        # linear_dropout_roll_4 — lines 69-289 — triton_gemm128x128x32_w8_s3_tf32x3_b1024_w4
        v764 = sk106_run(v755, self.layers[2].blocks[3].attn.proj.weight, self.layers[2].blocks[3].attn.proj.bias)
        # layer_norm_add_9 — lines 290-290 — PyTorch reference
        v765 = F.layer_norm(v764, (384,), weight=self.layers[2].blocks[3].norm1.weight, bias=self.layers[2].blocks[3].norm1.bias, eps=1e-05)
        v766 = v707.add(v765)
        # linear_gelu_dropout_8 — lines 34-36 — triton_gemm64x64x32_w4_s3_tf32x3_b1024_w4
        v769 = sk90_run(v766, self.layers[2].blocks[3].mlp.fc1.weight, self.layers[2].blocks[3].mlp.fc1.bias)
        # linear_dropout_12 — lines 37-38 — triton_gemm64x64x32_w4_s3_tf32x3_b1024_w4
        v771 = sk91_run(v769, self.layers[2].blocks[3].mlp.fc2.weight, self.layers[2].blocks[3].mlp.fc2.bias)
        # layer_norm_add_10 — lines 52-293 — triton_b1024_w4
        v773, v779 = sk110_run(v771, self.layers[2].blocks[3].norm2.weight, self.layers[2].blocks[3].norm2.bias, v766)
        # zeros_like_cat_9 — lines 156-156 — PyTorch reference
        v780 = torch.zeros_like(self.layers[2].blocks[4].attn.v_bias, requires_grad=False)
        v781 = torch.cat((self.layers[2].blocks[4].attn.q_bias, v780, self.layers[2].blocks[4].attn.v_bias))
        # linear_19 — lines 157-159 — PyTorch reference
        v782 = F.linear(input=v779, weight=self.layers[2].blocks[4].attn.qkv.weight, bias=v781)
        v783 = v782.reshape(40, 49, 3, 12, -1)
        v784 = v783.permute(2, 0, 3, 1, 4)
        v785 = torch.Tensor.__getitem__(v784, 0)
        v786 = torch.Tensor.__getitem__(v784, 1)
        v787 = torch.Tensor.__getitem__(v784, 2)
        # normalize_17 — lines 162-162 — PyTorch reference
        v788 = F.normalize(v785, p=2.0, dim=-1, eps=1e-12, out=None)
        # normalize_18 — lines 162-162 — PyTorch reference
        v789 = F.normalize(v786, p=2.0, dim=-1, eps=1e-12, out=None)
        v790 = v789.transpose(-2, -1)
        # matmul_17 — lines 162-162 — triton_gemm64x64x32_w4_s3_tf32x3
        v791 = sk80_run(v788, v790)
        # to_9 — lines 163-163 — PyTorch reference
        v792 = self.layers[2].blocks[4].attn.logit_scale.to(_mk_dev)
        # tensor_log_clamp_exp_9 — lines 163-164 — PyTorch reference
        v793 = _mk_const((542, torch.get_default_dtype(), _mk_dev), lambda: torch.tensor(1e+02, device=_mk_dev))
        v794 = torch.log(v793)
        v795 = torch.clamp(v792, max=v794)
        v796 = v795.exp()
        v797 = v791.mul(v796)
        # linear_relu_9 — lines 166-166 — PyTorch reference
        v798 = F.linear(self.layers[2].blocks[4].attn.relative_coords_table, self.layers[2].blocks[4].attn.cpb_mlp[0].weight, self.layers[2].blocks[4].attn.cpb_mlp[0].bias)
        v799 = F.relu(v798, inplace=True)
        # linear_20 — lines 166-166 — PyTorch reference
        v800 = F.linear(v799, self.layers[2].blocks[4].attn.cpb_mlp[2].weight, None)
        v801 = v800.view(-1, 12)
        # index_sigmoid_mul_add_9 — lines 167-179 — PyTorch reference
        v802 = self.layers[2].blocks[4].attn.relative_position_index.view(-1)
        v803 = torch.Tensor.__getitem__(v801, v802)
        v804 = v803.view(49, 49, -1)
        v805 = v804.permute(2, 0, 1)
        v806 = v805.contiguous()
        v807 = torch.sigmoid(v806)
        v808 = v807.mul(16)
        v809 = v808.unsqueeze(0)
        v810 = v797.add(v809)
        v811 = F.softmax(v810, dim=-1, _stacklevel=5, dtype=None)
        # dropout_9 — lines 181-181 — PyTorch reference
        v812 = F.dropout(v811, p=0.0, training=True, inplace=False)
        # matmul_18 — lines 183-183 — PyTorch reference
        v813 = v812.matmul(v787)
        v814 = v813.transpose(1, 2)
        v815 = v814.reshape(40, 49, 384)
        # linear_dropout_13 — lines 69-289 — triton_gemm64x64x32_w4_s3_tf32x3_b1024_w4
        v823 = sk88_run(v815, self.layers[2].blocks[4].attn.proj.weight, self.layers[2].blocks[4].attn.proj.bias)
        # layer_norm_add_11 — lines 290-290 — PyTorch reference
        v824 = F.layer_norm(v823, (384,), weight=self.layers[2].blocks[4].norm1.weight, bias=self.layers[2].blocks[4].norm1.bias, eps=1e-05)
        v825 = v773.add(v824)
        # linear_gelu_dropout_9 — lines 34-36 — triton_gemm64x64x32_w4_s3_tf32x3_b1024_w4
        v828 = sk90_run(v825, self.layers[2].blocks[4].mlp.fc1.weight, self.layers[2].blocks[4].mlp.fc1.bias)
        # linear_dropout_14 — lines 37-38 — triton_gemm64x64x32_w4_s3_tf32x3_b1024_w4
        v830 = sk91_run(v828, self.layers[2].blocks[4].mlp.fc2.weight, self.layers[2].blocks[4].mlp.fc2.bias)
        # layer_norm_add_roll_5 — lines 52-293 — triton_b1024_w4
        v832, v839 = sk92_run(v830, self.layers[2].blocks[4].norm2.weight, self.layers[2].blocks[4].norm2.bias, v825)
        # zeros_like_cat_10 — lines 156-156 — PyTorch reference
        v840 = torch.zeros_like(self.layers[2].blocks[5].attn.v_bias, requires_grad=False)
        v841 = torch.cat((self.layers[2].blocks[5].attn.q_bias, v840, self.layers[2].blocks[5].attn.v_bias))
        # linear_21 — lines 157-159 — PyTorch reference
        v842 = F.linear(input=v839, weight=self.layers[2].blocks[5].attn.qkv.weight, bias=v841)
        v843 = v842.reshape(40, 49, 3, 12, -1)
        v844 = v843.permute(2, 0, 3, 1, 4)
        v845 = torch.Tensor.__getitem__(v844, 0)
        v846 = torch.Tensor.__getitem__(v844, 1)
        v847 = torch.Tensor.__getitem__(v844, 2)
        # normalize_19 — lines 162-162 — PyTorch reference
        v848 = F.normalize(v845, p=2.0, dim=-1, eps=1e-12, out=None)
        # normalize_20 — lines 162-162 — PyTorch reference
        v849 = F.normalize(v846, p=2.0, dim=-1, eps=1e-12, out=None)
        v850 = v849.transpose(-2, -1)
        # matmul_19 — lines 162-162 — triton_gemm64x64x32_w4_s3_tf32x3
        v851 = sk80_run(v848, v850)
        # to_10 — lines 163-163 — PyTorch reference
        v852 = self.layers[2].blocks[5].attn.logit_scale.to(_mk_dev)
        # tensor_log_clamp_exp_10 — lines 163-164 — PyTorch reference
        v853 = _mk_const((602, torch.get_default_dtype(), _mk_dev), lambda: torch.tensor(1e+02, device=_mk_dev))
        v854 = torch.log(v853)
        v855 = torch.clamp(v852, max=v854)
        v856 = v855.exp()
        v857 = v851.mul(v856)
        # linear_relu_10 — lines 166-166 — PyTorch reference
        v858 = F.linear(self.layers[2].blocks[5].attn.relative_coords_table, self.layers[2].blocks[5].attn.cpb_mlp[0].weight, self.layers[2].blocks[5].attn.cpb_mlp[0].bias)
        v859 = F.relu(v858, inplace=True)
        # linear_22 — lines 166-166 — PyTorch reference
        v860 = F.linear(v859, self.layers[2].blocks[5].attn.cpb_mlp[2].weight, None)
        v861 = v860.view(-1, 12)
        # index_sigmoid_mul_add_10 — lines 167-175 — PyTorch reference
        v862 = self.layers[2].blocks[5].attn.relative_position_index.view(-1)
        v863 = torch.Tensor.__getitem__(v861, v862)
        v864 = v863.view(49, 49, -1)
        v865 = v864.permute(2, 0, 1)
        v866 = v865.contiguous()
        v867 = torch.sigmoid(v866)
        v868 = v867.mul(16)
        v869 = v868.unsqueeze(0)
        v870 = v857.add(v869)
        v871 = v870.view(10, 4, 12, 49, 49)
        # add_softmax_5 — lines 175-177 — PyTorch reference
        v872 = self.layers[2].blocks[5].attn_mask.unsqueeze(1)
        v873 = v872.unsqueeze(0)
        v874 = v871.add(v873)
        v875 = v874.view(-1, 12, 49, 49)
        v876 = F.softmax(v875, dim=-1, _stacklevel=5, dtype=None)
        # dropout_10 — lines 181-181 — PyTorch reference
        v877 = F.dropout(v876, p=0.0, training=True, inplace=False)
        # matmul_20 — lines 183-183 — PyTorch reference
        v878 = v877.matmul(v847)
        v879 = v878.transpose(1, 2)
        v880 = v879.reshape(40, 49, 384)
        # linear_dropout_roll_5 — lines 69-289 — triton_gemm128x128x32_w8_s3_tf32x3_b1024_w4
        v889 = sk106_run(v880, self.layers[2].blocks[5].attn.proj.weight, self.layers[2].blocks[5].attn.proj.bias)
        # layer_norm_add_12 — lines 290-290 — PyTorch reference
        v890 = F.layer_norm(v889, (384,), weight=self.layers[2].blocks[5].norm1.weight, bias=self.layers[2].blocks[5].norm1.bias, eps=1e-05)
        v891 = v832.add(v890)
        # linear_gelu_dropout_10 — lines 34-36 — triton_gemm64x64x32_w4_s3_tf32x3_b1024_w4
        v894 = sk90_run(v891, self.layers[2].blocks[5].mlp.fc1.weight, self.layers[2].blocks[5].mlp.fc1.bias)
        # linear_dropout_15 — lines 37-38 — triton_gemm64x64x32_w4_s3_tf32x3_b1024_w4
        v896 = sk91_run(v894, self.layers[2].blocks[5].mlp.fc2.weight, self.layers[2].blocks[5].mlp.fc2.bias)
        # layer_norm_add_cat_3 — lines 293-330 — triton_b1024_w4
        v905 = sk180_run(v896, self.layers[2].blocks[5].norm2.weight, self.layers[2].blocks[5].norm2.bias, v891)
        # linear_23 — lines 332-332 — PyTorch reference
        v906 = F.linear(v905, self.layers[2].downsample.reduction.weight, None)
        # layer_norm_3 — lines 52-333 — PyTorch reference
        v907 = F.layer_norm(v906, (768,), weight=self.layers[2].downsample.norm.weight, bias=self.layers[2].downsample.norm.bias, eps=1e-05)
        v908 = v907.view(10, 7, 7, 768)
        v909 = v908.view(10, 1, 7, 1, 7, 768)
        v910 = v909.permute(0, 1, 3, 2, 4, 5)
        v911 = v910.contiguous()
        v912 = v911.view(-1, 7, 7, 768)
        v913 = v912.view(-1, 49, 768)
        # zeros_like_cat_11 — lines 156-156 — PyTorch reference
        v914 = torch.zeros_like(self.layers[3].blocks[0].attn.v_bias, requires_grad=False)
        v915 = torch.cat((self.layers[3].blocks[0].attn.q_bias, v914, self.layers[3].blocks[0].attn.v_bias))
        # linear_24 — lines 157-159 — PyTorch reference
        v916 = F.linear(input=v913, weight=self.layers[3].blocks[0].attn.qkv.weight, bias=v915)
        v917 = v916.reshape(10, 49, 3, 24, -1)
        v918 = v917.permute(2, 0, 3, 1, 4)
        v919 = torch.Tensor.__getitem__(v918, 0)
        v920 = torch.Tensor.__getitem__(v918, 1)
        v921 = torch.Tensor.__getitem__(v918, 2)
        # normalize_21 — lines 162-162 — triton_b1024_w4
        v922 = sk185_run(v919)
        # normalize_22 — lines 162-162 — PyTorch reference
        v923 = F.normalize(v920, p=2.0, dim=-1, eps=1e-12, out=None)
        v924 = v923.transpose(-2, -1)
        # matmul_21 — lines 162-162 — triton_gemm64x64x32_w4_s3_tf32x3
        v925 = sk187_run(v922, v924)
        # to_11 — lines 163-163 — PyTorch reference
        v926 = self.layers[3].blocks[0].attn.logit_scale.to(_mk_dev)
        # tensor_log_clamp_exp_11 — lines 163-164 — PyTorch reference
        v927 = _mk_const((676, torch.get_default_dtype(), _mk_dev), lambda: torch.tensor(1e+02, device=_mk_dev))
        v928 = torch.log(v927)
        v929 = torch.clamp(v926, max=v928)
        v930 = v929.exp()
        v931 = v925.mul(v930)
        # linear_relu_11 — lines 166-166 — PyTorch reference
        v932 = F.linear(self.layers[3].blocks[0].attn.relative_coords_table, self.layers[3].blocks[0].attn.cpb_mlp[0].weight, self.layers[3].blocks[0].attn.cpb_mlp[0].bias)
        v933 = F.relu(v932, inplace=True)
        # linear_25 — lines 166-166 — PyTorch reference
        v934 = F.linear(v933, self.layers[3].blocks[0].attn.cpb_mlp[2].weight, None)
        v935 = v934.view(-1, 24)
        # index_sigmoid_mul_add_11 — lines 167-179 — PyTorch reference
        v936 = self.layers[3].blocks[0].attn.relative_position_index.view(-1)
        v937 = torch.Tensor.__getitem__(v935, v936)
        v938 = v937.view(49, 49, -1)
        v939 = v938.permute(2, 0, 1)
        v940 = v939.contiguous()
        v941 = torch.sigmoid(v940)
        v942 = v941.mul(16)
        v943 = v942.unsqueeze(0)
        v944 = v931.add(v943)
        v945 = F.softmax(v944, dim=-1, _stacklevel=5, dtype=None)
        # dropout_11 — lines 181-181 — PyTorch reference
        v946 = F.dropout(v945, p=0.0, training=True, inplace=False)
        # matmul_22 — lines 183-183 — PyTorch reference
        v947 = v946.matmul(v921)
        v948 = v947.transpose(1, 2)
        v949 = v948.reshape(10, 49, 768)
        # linear_dropout_16 — lines 69-289 — triton_gemm64x64x32_w4_s3_tf32x3_b1024_w4
        v957 = sk195_run(v949, self.layers[3].blocks[0].attn.proj.weight, self.layers[3].blocks[0].attn.proj.bias)
        # layer_norm_add_13 — lines 290-290 — PyTorch reference
        v958 = F.layer_norm(v957, (768,), weight=self.layers[3].blocks[0].norm1.weight, bias=self.layers[3].blocks[0].norm1.bias, eps=1e-05)
        v959 = v907.add(v958)
        # linear_gelu_dropout_11 — lines 34-36 — triton_gemm64x64x32_w4_s3_tf32x3_b1024_w4
        v962 = sk197_run(v959, self.layers[3].blocks[0].mlp.fc1.weight, self.layers[3].blocks[0].mlp.fc1.bias)
        # linear_dropout_17 — lines 37-38 — triton_gemm64x64x32_w4_s3_tf32x3_b1024_w4
        v964 = sk198_run(v962, self.layers[3].blocks[0].mlp.fc2.weight, self.layers[3].blocks[0].mlp.fc2.bias)
        # layer_norm_add_14 — lines 52-293 — triton_b1024_w4
        v966, v972 = sk199_run(v964, self.layers[3].blocks[0].norm2.weight, self.layers[3].blocks[0].norm2.bias, v959)
        # zeros_like_cat_12 — lines 156-156 — PyTorch reference
        v973 = torch.zeros_like(self.layers[3].blocks[1].attn.v_bias, requires_grad=False)
        v974 = torch.cat((self.layers[3].blocks[1].attn.q_bias, v973, self.layers[3].blocks[1].attn.v_bias))
        # linear_26 — lines 157-159 — PyTorch reference
        v975 = F.linear(input=v972, weight=self.layers[3].blocks[1].attn.qkv.weight, bias=v974)
        v976 = v975.reshape(10, 49, 3, 24, -1)
        v977 = v976.permute(2, 0, 3, 1, 4)
        v978 = torch.Tensor.__getitem__(v977, 0)
        v979 = torch.Tensor.__getitem__(v977, 1)
        v980 = torch.Tensor.__getitem__(v977, 2)
        # normalize_23 — lines 162-162 — triton_b1024_w4
        v981 = sk185_run(v978)
        # normalize_24 — lines 162-162 — PyTorch reference
        v982 = F.normalize(v979, p=2.0, dim=-1, eps=1e-12, out=None)
        v983 = v982.transpose(-2, -1)
        # matmul_23 — lines 162-162 — triton_gemm64x64x32_w4_s3_tf32x3
        v984 = sk187_run(v981, v983)
        # to_12 — lines 163-163 — PyTorch reference
        v985 = self.layers[3].blocks[1].attn.logit_scale.to(_mk_dev)
        # tensor_log_clamp_exp_12 — lines 163-164 — PyTorch reference
        v986 = _mk_const((735, torch.get_default_dtype(), _mk_dev), lambda: torch.tensor(1e+02, device=_mk_dev))
        v987 = torch.log(v986)
        v988 = torch.clamp(v985, max=v987)
        v989 = v988.exp()
        v990 = v984.mul(v989)
        # linear_relu_12 — lines 166-166 — PyTorch reference
        v991 = F.linear(self.layers[3].blocks[1].attn.relative_coords_table, self.layers[3].blocks[1].attn.cpb_mlp[0].weight, self.layers[3].blocks[1].attn.cpb_mlp[0].bias)
        v992 = F.relu(v991, inplace=True)
        # linear_27 — lines 166-166 — PyTorch reference
        v993 = F.linear(v992, self.layers[3].blocks[1].attn.cpb_mlp[2].weight, None)
        v994 = v993.view(-1, 24)
        # index_sigmoid_mul_add_12 — lines 167-179 — PyTorch reference
        v995 = self.layers[3].blocks[1].attn.relative_position_index.view(-1)
        v996 = torch.Tensor.__getitem__(v994, v995)
        v997 = v996.view(49, 49, -1)
        v998 = v997.permute(2, 0, 1)
        v999 = v998.contiguous()
        v1000 = torch.sigmoid(v999)
        v1001 = v1000.mul(16)
        v1002 = v1001.unsqueeze(0)
        v1003 = v990.add(v1002)
        v1004 = F.softmax(v1003, dim=-1, _stacklevel=5, dtype=None)
        # dropout_12 — lines 181-181 — PyTorch reference
        v1005 = F.dropout(v1004, p=0.0, training=True, inplace=False)
        # matmul_24 — lines 183-183 — PyTorch reference
        v1006 = v1005.matmul(v980)
        v1007 = v1006.transpose(1, 2)
        v1008 = v1007.reshape(10, 49, 768)
        # linear_dropout_18 — lines 69-289 — triton_gemm64x64x32_w4_s3_tf32x3_b1024_w4
        v1016 = sk195_run(v1008, self.layers[3].blocks[1].attn.proj.weight, self.layers[3].blocks[1].attn.proj.bias)
        # layer_norm_add_15 — lines 290-290 — PyTorch reference
        v1017 = F.layer_norm(v1016, (768,), weight=self.layers[3].blocks[1].norm1.weight, bias=self.layers[3].blocks[1].norm1.bias, eps=1e-05)
        v1018 = v966.add(v1017)
        # linear_gelu_dropout_12 — lines 34-36 — triton_gemm64x64x32_w4_s3_tf32x3_b1024_w4
        v1021 = sk197_run(v1018, self.layers[3].blocks[1].mlp.fc1.weight, self.layers[3].blocks[1].mlp.fc1.bias)
        # linear_dropout_19 — lines 37-38 — triton_gemm64x64x32_w4_s3_tf32x3_b1024_w4
        v1023 = sk198_run(v1021, self.layers[3].blocks[1].mlp.fc2.weight, self.layers[3].blocks[1].mlp.fc2.bias)
        # layer_norm_add_16 — lines 293-293 — PyTorch reference
        v1024 = F.layer_norm(v1023, (768,), weight=self.layers[3].blocks[1].norm2.weight, bias=self.layers[3].blocks[1].norm2.bias, eps=1e-05)
        v1025 = v1018.add(v1024)
        # layer_norm_4 — lines 522-523 — PyTorch reference
        v1026 = F.layer_norm(v1025, (768,), weight=self.norm.weight, bias=self.norm.bias, eps=1e-05)
        v1027 = v1026.transpose(1, 2)
        # adaptive_avg_pool1d — lines 523-524 — PyTorch reference
        v1028 = F.adaptive_avg_pool1d(v1027, 1)
        v1029 = torch.flatten(v1028, 1)
        # linear_28 — lines 529-529 — PyTorch reference
        v1030 = F.linear(v1029, self.head.weight, self.head.bias)
        return v1030


# ---- CUDA graph of the whole forward (MKEvolve) ----
import torch  # noqa: E402 (the runtime of the graph variant)

MK_GRAPH_SHAPES = 4


class _MkGraphs:
    """One module's captured forwards, by input signature."""

    def __init__(self, module: torch.nn.Module) -> None:
        self.modules = list(module.modules())
        self.entries: dict = {}
        self.why = ""
        # Live views of every module's parameter and buffer dicts: a replaced parameter
        # shows up in them, and walking them is ~4x cheaper per call than walking the
        # modules (ResNet-101: 626 tensors in 287 modules, ~80 us of Python otherwise).
        self.views = [d.values() for m in self.modules for d in (m._parameters, m._buffers)]

    def state(self) -> list:
        return [t for v in self.views for t in v if t is not None]

    def key(self, args: tuple, state: list):
        # every module's mode (one submodule may be put in eval alone)
        parts: list = [tuple([m.training for m in self.modules])]
        for a in args:
            if isinstance(a, torch.Tensor):
                if a.device.type != "cuda":
                    return None
                parts.append((tuple(a.shape), a.stride(), a.dtype, a.device.index))
            elif a is None or isinstance(a, (bool, int, float, str)):
                parts.append((type(a).__name__, a))
            else:
                return None
        if not all([t.is_cuda for t in state]):
            return None
        # moved or replaced storage (.to(), .data = ...): a graph holds addresses
        parts.append(tuple([t.data_ptr() for t in state]))
        return tuple(parts)

    def capture(self, forward, args: tuple):
        # A replay records no autograd history, so neither does its capture.
        with torch.no_grad():
            static = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
            saved = [(t, t.clone()) for t in self.state()]
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(2):
                    forward(*static)
            torch.cuda.current_stream().wait_stream(side)
            for t, s in saved:
                t.copy_(s)
            del saved
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                out = forward(*static)
        return graph, static, out


class _MkForwardOnly(torch.autograd.Function):
    """A replayed output while autograd records: the replay kept no history, so a
    backward through it stops here with the reason, never with gradients silently
    missing."""

    @staticmethod
    def forward(ctx, anchor: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        return out.clone()

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        raise RuntimeError(
            "this ModelNew replays its forward as a CUDA graph, which records no autograd "
            "history: it is for inference (gradients come from the original Model)")


def _mk_fresh(out, anchor):
    if isinstance(out, torch.Tensor):
        if anchor is not None and (out.is_floating_point() or out.is_complex()):
            return _MkForwardOnly.apply(anchor, out)
        return out.clone()
    if isinstance(out, (tuple, list)):
        return type(out)(_mk_fresh(o, anchor) for o in out)
    return out


def _mk_autograd_anchor(state: list, args: tuple):
    """A tensor autograd tracks, when it records: the outputs then carry a backward
    that says why there is none."""
    if not torch.is_grad_enabled():
        return None
    return next((t for t in (*state, *args)
                 if isinstance(t, torch.Tensor) and t.requires_grad), None)


def _mk_graph_call(module: torch.nn.Module, forward, args: tuple):
    graphs = getattr(module, "_mk_graphs", None)
    if graphs is None:
        graphs = _MkGraphs(module)
        module._mk_graphs = graphs
    state = graphs.state()
    key = graphs.key(args, state)
    if key is None:
        return forward(*args)
    entry = graphs.entries.get(key)
    if entry is None and key not in graphs.entries:
        if len(graphs.entries) >= MK_GRAPH_SHAPES:
            return forward(*args)
        try:
            entry = graphs.capture(forward, args)
        except Exception as e:  # not capturable (a host sync, say): run it plainly
            graphs.why = f"{type(e).__name__}: {e}"
            entry = None
        graphs.entries[key] = entry
    if entry is None:
        return forward(*args)
    graph, static, out = entry
    with torch.no_grad():
        for s, a in zip(static, args, strict=True):
            if isinstance(s, torch.Tensor):
                s.copy_(a)
    graph.replay()
    return _mk_fresh(out, _mk_autograd_anchor(state, args))


class ModelNew(ModelNew):
    """ModelNew above, its forward replayed as one CUDA graph (launch-bound
    programs); the plain forward where a graph would be wrong."""

    def forward(self, *args):
        return _mk_graph_call(self, super().forward, args)
