package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
)

// apiError is an error in OpenAI's shape, with the HTTP status it goes out
// with:
//
//	{"error": {"message": "...", "type": "invalid_request_error", "param": "n", "code": null}}
type apiError struct {
	Status  int     `json:"-"`
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

func (e *apiError) Error() string { return e.Message }

// OpenAI's error types.
const (
	typeInvalidRequest = "invalid_request_error"
	typeAuthentication = "authentication_error"
	typeNotFound       = "not_found_error"
	typeServer         = "server_error"
	typeUnavailable    = "service_unavailable"
)

func invalid(param, format string, args ...any) *apiError {
	e := &apiError{Status: http.StatusBadRequest, Type: typeInvalidRequest, Message: fmt.Sprintf(format, args...)}
	if param != "" {
		e.Param = &param
	}
	return e
}

// notSupported refuses a parameter gotok does not implement yet, rather
// than ignoring it and answering something the client did not ask for.
func notSupported(param, what string) *apiError {
	e := invalid(param, "%s is not supported yet by this server", what)
	code := "unsupported_parameter"
	e.Code = &code
	return e
}

func withCode(e *apiError, code string) *apiError {
	e.Code = &code
	return e
}

// writeError sends err in OpenAI's error shape; an error that is not an
// *apiError is an internal one, 500.
func writeError(w http.ResponseWriter, err error) {
	var e *apiError
	if !errors.As(err, &e) {
		e = &apiError{Status: http.StatusInternalServerError, Type: typeServer, Message: err.Error()}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.Status)
	json.NewEncoder(w).Encode(struct {
		Error *apiError `json:"error"`
	}{e})
}
