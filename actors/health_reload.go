package actors

import "strconv"

// keyNames are the names of n keys: ids when it names them all, else their positions.
func keyNames(ids []string, n int) []string {
	if len(ids) == n {
		return ids
	}
	names := make([]string, max(n, 1))
	for i := range names {
		names[i] = "#" + strconv.Itoa(i)
	}
	return names
}
