package gotok

import (
	"errors"

	"gotok/backend"
	"gotok/model"
)

// newCUDA is wired to backend/cuda once it lands.
func newCUDA(mm *model.Model, o Options) (backend.Backend, error) {
	return nil, errors.New("this build has no CUDA backend")
}
