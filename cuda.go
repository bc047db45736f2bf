package gotok

import (
	"gotok/backend"
	"gotok/backend/cuda"
	"gotok/model"
)

func newCUDA(mm *model.Model, o Options) (backend.Backend, error) {
	b, err := cuda.New(mm, cuda.Options{ContextLen: o.ContextLen})
	if err != nil {
		return nil, err // not a typed nil *cuda.Backend inside the interface
	}
	return b, nil
}
