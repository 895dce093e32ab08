// CRC-32C (Castagnoli), the checksum of TFRecord framing (TensorBoard event files).
#pragma once

#include <cstddef>
#include <cstdint>

namespace moelab {

uint32_t crc32c(const void* data, size_t size);

// TFRecord stores checksums masked (rotated and offset), so that a CRC of data
// that itself holds CRCs stays well distributed.
uint32_t masked_crc32c(const void* data, size_t size);

}  // namespace moelab
