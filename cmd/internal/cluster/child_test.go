package cluster

const childEnv = "TOLLGATE_CLUSTER_CHILD"

func childMain() int { return 0 }
