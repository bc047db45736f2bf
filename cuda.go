package gotok

import (
	"gotok/backend"
	"gotok/backend/cuda"
	"gotok/model"
)

func newCUDA(mm *model.Model, o Options) (backend.Backend, error) {
	return cuda.New(mm, cuda.Options{ContextLen: o.ContextLen})
}
