#include "emulation/gzip_file.h"

#include <zlib.h>

#include "base/errors.h"

namespace tb::emu {

std::vector<uint8_t> read_gzip(const std::string& path, const std::string& remedy) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) throw UsageError("cannot open '" + path + "' (" + remedy + ")");
  gzbuffer(f, 1 << 17);
  std::vector<uint8_t> data;
  uint8_t buf[1 << 16];
  int n;
  while ((n = gzread(f, buf, sizeof buf)) > 0) data.insert(data.end(), buf, buf + n);
  const bool failed = n < 0;
  gzclose(f);
  if (failed) throw UsageError("'" + path + "' is not a readable gzip file");
  return data;
}

}  // namespace tb::emu
