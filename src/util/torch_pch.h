// Precompiled header: the torch includes every heavy translation unit needs.
#pragma once
#include <torch/torch.h>
