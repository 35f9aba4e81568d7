#pragma once
// Epilogue stages and their composition.
#include "kfuse/epilogue/activations.hpp"
#include "kfuse/epilogue/affine.hpp"
#include "kfuse/epilogue/epilogue.hpp"
#include "kfuse/epilogue/math.hpp"
#include "kfuse/epilogue/quantize.hpp"
