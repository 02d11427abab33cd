package main

import "github.com/tollgate/tollgate/actors"

func actorsFault(provider, model string) actors.Fault {
	return actors.Fault{Provider: provider, Model: model}
}
