// What `npu-smi` prints, read into data: the `info` table (chips, their health and the processes
// on them), `info -t health -i N -c C` and the `info -m` map from npu-smi's (NPU, chip) to the
// physical id that /dev/davinciN and hccn_tool use. Tables are split on '|', never on columns:
// border widths differ between driver versions (../shared/design/HEALTH_TOOLS.md).
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace npu_run {

struct NpuSmiChip {
  int npu = 0;
  int chip = 0;
  std::string name;    // "910B3"
  std::string health;  // "OK", "Warning", "Alarm", "Critical", "UNKNOWN"
};

struct NpuSmiProcess {
  int npu = 0;
  int chip = 0;
  long pid = 0;      // the host's pid, also inside a container
  std::string name;  // empty inside a container
};

struct NpuSmiTable {
  std::vector<NpuSmiChip> chips;
  std::vector<NpuSmiProcess> processes;
};

// `npu-smi info`. Rows it cannot read are skipped; an empty table means nothing was recognised.
NpuSmiTable parse_npu_smi_info(const std::string& text);

struct ChipHealth {
  std::string status;                    // "OK", "Alarm", ...
  std::vector<std::string> error_codes;  // "80E18402"; empty for NA
  std::string information;               // "" for NA
};

// `npu-smi info -t health -i N -c C`; nullopt without a "Health Status" line.
std::optional<ChipHealth> parse_chip_health(const std::string& text);

struct ChipMapRow {
  int npu = 0;
  int chip = 0;
  int physical_id = 0;  // Chip Phy-ID where printed (A3), else Chip Logic ID (A2 and older)
  std::string name;
};

// `npu-smi info -m`: the rows with a logic id (an MCU's row has "-" and is left out).
std::vector<ChipMapRow> parse_chip_map(const std::string& text);

// A process npu-smi lists on one of a job's devices.
struct DeviceProcess {
  int device = 0;  // physical id
  long pid = 0;
  std::string name;  // npu-smi's; empty inside a container
};

// The process rows of `table` on `devices` (physical ids), placed through the `info -m` map.
std::vector<DeviceProcess> processes_on_devices(const NpuSmiTable& table,
                                                const std::vector<ChipMapRow>& map,
                                                const std::vector<int>& devices);

}  // namespace npu_run
