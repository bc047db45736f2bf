package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"

	"github.com/spf13/cobra"

	"gotok/perplexity"
)

func newPerplexityCmd() *cobra.Command {
	var (
		lf           loadFlags
		textFile     string
		chunks       int
		klBase       string
		klDivergence bool
	)
	cmd := &cobra.Command{
		Use:   "perplexity -m MODEL -f TEXT -c N [--chunks K] [--kl-divergence-base FILE [--kl-divergence]]",
		Short: "Measure a model's perplexity on a text, or its KL divergence from a base model",
		Long: `perplexity computes what llama.cpp's llama-perplexity computes: the text is
tokenized whole (with BOS when the model adds one) and cut into chunks of -c
tokens; each chunk runs from an empty context with its first token replaced
by BOS when the model adds BOS, and only the second half of each chunk is
scored. One trailing newline of the text is dropped, as llama.cpp's -f
does. The running estimate after each chunk, [1]…,[2]…, goes to stderr;
the final estimate with its standard error to stdout. The text must
tokenize to at least 2*N tokens.

--kl-divergence-base FILE also saves the scored log-probabilities (with the
tokens) to FILE, in llama-perplexity's format, so either tool reads it.
--kl-divergence then runs another model (a quantized copy, say) over the
tokens in FILE, without -f, and reports the mean KL divergence from the
base, how often both models' most likely token agree, and the ratio of
their perplexities, as llama-perplexity does.

Example:
  gotok perplexity -m ../shared/models/stories260K.gguf -f story.txt -c 128
  gotok perplexity -m f16.gguf -f wiki.test.raw -c 512 --kl-divergence-base f16.kld
  gotok perplexity -m q4_0.gguf --kl-divergence-base f16.kld --kl-divergence`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			stderr, stdout := cmd.ErrOrStderr(), cmd.OutOrStdout()
			if chunks < 0 {
				chunks = 0 // llama.cpp's -1: all
			}
			if klDivergence {
				if klBase == "" {
					return errors.New("perplexity: --kl-divergence needs --kl-divergence-base FILE, the base model's log-probabilities")
				}
				return runKLDivergence(cmd, &lf, klBase, chunks)
			}
			if textFile == "" {
				return errors.New("perplexity: -f TEXT is required: the text to measure")
			}
			text, err := os.ReadFile(textFile)
			if err != nil {
				return fmt.Errorf("perplexity: reading the text: %w", err)
			}
			// llama.cpp's -f drops one trailing newline; so do we, for the
			// same tokens.
			text = bytes.TrimSuffix(text, []byte("\n"))
			m, _, err := lf.load(cmd.Context(), stderr)
			if err != nil {
				return err
			}
			defer m.Close()
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt)
			defer stop()

			o := perplexity.Options{Context: lf.ctx, Chunks: chunks, Progress: func(p perplexity.Progress) {
				if p.Chunk == 1 {
					perPass := p.Elapsed.Seconds()
					fmt.Fprintf(stderr, "perplexity: %.2f seconds per pass - ETA %.2f minutes\n", perPass, perPass*float64(p.Chunks)/60)
				}
				fmt.Fprintf(stderr, "[%d]%.4f,", p.Chunk, p.PPL)
			}}
			var base *atomicFile
			if klBase != "" {
				if base, err = createAtomic(klBase); err != nil {
					return err
				}
				defer base.abort()
				o.Base = base
			}
			fmt.Fprintf(stderr, "perplexity: %s on %s\n", textFile, m.Backend().Name())
			r, err := perplexity.Run(ctx, m, string(text), o)
			if err != nil {
				return err
			}
			fmt.Fprintln(stderr)
			if base != nil {
				if err := base.commit(); err != nil {
					return err
				}
				fmt.Fprintf(stderr, "perplexity: saved the log-probabilities to %s\n", klBase)
			}
			fmt.Fprintf(stderr, "perplexity: %d tokens, %d chunks of %d, %d scored, in %.2f s\n", r.Tokens, r.Chunks, r.Context, r.Count, r.Elapsed.Seconds())
			fmt.Fprintf(stdout, "Final estimate: PPL = %.4f +/- %.5f\n", r.PPL, r.Uncertainty)
			return nil
		},
	}
	f := cmd.Flags()
	lf.add(f)
	f.StringVarP(&textFile, "file", "f", "", "the text to measure")
	f.IntVar(&chunks, "chunks", 0, "score at most this many chunks (0 or -1: all)")
	f.StringVar(&klBase, "kl-divergence-base", "", "save the base log-probabilities to FILE (or, with --kl-divergence, read them)")
	f.BoolVar(&klDivergence, "kl-divergence", false, "compare the model with the base log-probabilities in --kl-divergence-base")
	return cmd
}

func runKLDivergence(cmd *cobra.Command, lf *loadFlags, basePath string, chunks int) error {
	stderr, stdout := cmd.ErrOrStderr(), cmd.OutOrStdout()
	in, err := os.Open(basePath)
	if err != nil {
		return fmt.Errorf("perplexity: %w", err)
	}
	defer in.Close()
	m, _, err := lf.load(cmd.Context(), stderr)
	if err != nil {
		return err
	}
	defer m.Close()
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt)
	defer stop()
	fmt.Fprintf(stderr, "kl-divergence: %s on %s\n", basePath, m.Backend().Name())
	fmt.Fprintln(stderr, "chunk             PPL               ln(PPL(Q)/PPL(base))          KL Divergence              Δp RMS            Same top p")
	r, err := perplexity.KLDivergence(ctx, m, in, perplexity.Options{Chunks: chunks, Progress: func(p perplexity.Progress) {
		s := p.KL
		ppl, pplErr := s.PPL()
		lr, lrErr := s.LogPPLRatio()
		kld, kldErr := s.KLD()
		rms, rmsErr := s.DeltaPRMS()
		top, topErr := s.SameTopFraction()
		fmt.Fprintf(stderr, "%4d    %9.4f ± %9.4f    %10.5f ± %10.5f    %10.5f ± %10.5f    %6.3f ± %6.3f %%    %6.3f ± %6.3f %%\n",
			p.Chunk, ppl, pplErr, lr, lrErr, kld, kldErr, 100*rms, 100*rmsErr, 100*top, 100*topErr)
	}})
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "kl-divergence: %d chunks of %d, %d positions, in %.2f s\n", r.Chunks, r.Context, r.Stats.Count, r.Elapsed.Seconds())
	printKLStats(stdout, r.Stats)
	return nil
}

// printKLStats prints llama-perplexity's closing statistics.
func printKLStats(w io.Writer, s *perplexity.KLStats) {
	pm := func(name string, v, e float64) { fmt.Fprintf(w, "%-30s: %10.6f ± %10.6f\n", name, v, e) }
	fmt.Fprintln(w, "====== Perplexity statistics ======")
	v, e := s.PPL()
	pm("Mean PPL(Q)", v, e)
	v, e = s.BasePPL()
	pm("Mean PPL(base)", v, e)
	fmt.Fprintf(w, "%-30s: %6.2f%%\n", "Cor(ln(PPL(Q)), ln(PPL(base)))", 100*s.Correlation())
	v, e = s.LogPPLRatio()
	pm("Mean ln(PPL(Q)/PPL(base))", v, e)
	v, e = s.PPLRatio()
	pm("Mean PPL(Q)/PPL(base)", v, e)
	v, e = s.PPLDiff()
	pm("Mean PPL(Q)-PPL(base)", v, e)

	fmt.Fprintln(w, "\n====== KL divergence statistics ======")
	v, e = s.KLD()
	fmt.Fprintf(w, "Mean    KLD: %10.6f ± %10.6f\n", v, e)
	for _, q := range []struct {
		name string
		f    float64
	}{{"Maximum", 1}, {"99.9%", 0.999}, {"99.0%", 0.99}, {"95.0%", 0.95}, {"90.0%", 0.9}, {"Median", 0.5},
		{"10.0%", 0.1}, {" 5.0%", 0.05}, {" 1.0%", 0.01}, {" 0.1%", 0.001}, {"Minimum", 0}} {
		fmt.Fprintf(w, "%-7s KLD: %10.6f\n", q.name, s.KLDPercentile(q.f))
	}

	fmt.Fprintln(w, "\n====== Token probability statistics ======")
	v, e = s.DeltaP()
	fmt.Fprintf(w, "Mean    Δp: %6.3f ± %5.3f %%\n", 100*v, 100*e)
	for _, q := range []struct {
		name string
		f    float64
	}{{"Maximum", 1}, {"99.9%", 0.999}, {"99.0%", 0.99}, {"95.0%", 0.95}, {"90.0%", 0.9}, {"75.0%", 0.75}, {"Median", 0.5},
		{"25.0%", 0.25}, {"10.0%", 0.1}, {" 5.0%", 0.05}, {" 1.0%", 0.01}, {" 0.1%", 0.001}, {"Minimum", 0}} {
		fmt.Fprintf(w, "%-7s Δp: %6.3f%%\n", q.name, 100*s.DeltaPPercentile(q.f))
	}
	v, e = s.DeltaPRMS()
	fmt.Fprintf(w, "RMS Δp    : %6.3f ± %5.3f %%\n", 100*v, 100*e)
	v, e = s.SameTopFraction()
	fmt.Fprintf(w, "Same top p: %6.3f ± %5.3f %%\n", 100*v, 100*e)
}

// atomicFile is written under a temporary name beside its path and renamed
// into place by commit, so a failed run leaves no half-written file.
type atomicFile struct {
	*os.File
	path string
	done bool
}

func createAtomic(path string) (*atomicFile, error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return nil, fmt.Errorf("perplexity: %w", err)
	}
	return &atomicFile{File: f, path: path}, nil
}

func (a *atomicFile) commit() error {
	if err := a.Sync(); err != nil {
		return fmt.Errorf("perplexity: writing %s: %w", a.path, err)
	}
	if err := a.Close(); err != nil {
		return fmt.Errorf("perplexity: writing %s: %w", a.path, err)
	}
	if err := os.Rename(a.Name(), a.path); err != nil {
		return fmt.Errorf("perplexity: %w", err)
	}
	a.done = true
	return nil
}

// abort removes the temporary file unless commit has renamed it.
func (a *atomicFile) abort() {
	if !a.done {
		a.Close()
		os.Remove(a.Name())
	}
}
