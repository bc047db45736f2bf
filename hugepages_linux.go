package gotok

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// inMemoryWeights reports whether a CPU model of size bytes should be read
// into memory of its own on huge pages (model.LoadInMemory) rather than
// mapped, and why not when not: only where transparent huge pages are on
// (anonymous memory on 4 KiB pages decodes slower than the mapping) and
// the file fits in well under the memory available, the host's or the
// container's (the mapping pages in and out; a copy that does not fit
// would be killed).
func inMemoryWeights(size int64) (bool, string) {
	thp, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	if err != nil || strings.Contains(string(thp), "[never]") {
		return false, "transparent huge pages are off"
	}
	avail, err := memAvailable()
	if err != nil {
		return false, err.Error()
	}
	if room, ok := cgroupRoom(); ok && room < avail {
		avail = room // a container's limit, below the host's memory
	}
	if size > avail/4*3 {
		return false, fmt.Sprintf("%d MiB of weights against %d MiB of memory available", size>>20, avail>>20)
	}
	return true, ""
}

// memAvailable is /proc/meminfo's MemAvailable in bytes.
func memAvailable() (int64, error) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok || name != "MemAvailable" {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/meminfo: MemAvailable %q: %w", rest, err)
		}
		return kb << 10, nil
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("/proc/meminfo has no MemAvailable")
}

// cgroupRoom is what the process's memory cgroup still allows (its limit
// less its use), where one sets a limit: cgroup v2's memory.max and
// memory.current, or v1's memory.limit_in_bytes and memory.usage_in_bytes.
func cgroupRoom() (int64, bool) {
	for _, f := range [][2]string{
		{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"},
		{"/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory/memory.usage_in_bytes"},
	} {
		limit, err1 := readInt(f[0])
		used, err2 := readInt(f[1])
		if err1 == nil && err2 == nil {
			return max(limit-used, 0), true
		}
	}
	return 0, false
}

// readInt reads a file holding one integer ("max" and other words fail).
func readInt(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}
