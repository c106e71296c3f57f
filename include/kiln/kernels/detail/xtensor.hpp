#pragma once
// The xtensor (and, through it, xsimd) headers the element-wise kernels use,
// included in one place. GCC 12 warns "may be used uninitialized" inside its
// own avx512fintrin.h when it inlines xsimd's AVX-512 math (GCC PR 105593, a
// false warning fixed in GCC 13); the intrinsics headers are read here first,
// with that warning off, so that a user's -Wall build of the kernels stays quiet.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif
#include <xsimd/xsimd.hpp>
#include <xtensor/xadapt.hpp>
#include <xtensor/xassign.hpp>
#include <xtensor/xmath.hpp>
#include <xtensor/xoperation.hpp>
#include <xtensor/xtensor.hpp>
#include <xtensor/xvectorize.hpp>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
