package llm

import "fmt"

// Priority is a request's class. Lower values are served first.
type Priority int

const (
	Interactive   Priority = iota // a person is waiting at a screen (the default)
	Normal                        // tests, probes
	Background                    // batch work
	NumPriorities = 3
)

var priorityNames = [...]string{"interactive", "normal", "background"}

func (p Priority) String() string {
	if p >= 0 && int(p) < len(priorityNames) {
		return priorityNames[p]
	}
	return fmt.Sprintf("Priority(%d)", int(p))
}

// ParsePriority reads an X-Gateway-Priority value; "" is Interactive.
func ParsePriority(s string) (Priority, error) {
	if s == "" {
		return Interactive, nil
	}
	for i, n := range priorityNames {
		if s == n {
			return Priority(i), nil
		}
	}
	return 0, fmt.Errorf("priority %q: want interactive, normal or background", s)
}
