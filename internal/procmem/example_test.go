package procmem_test

import (
	"fmt"
	"strings"

	"github.com/nodekit/nodekit/internal/procmem"
)

func ExampleParse() {
	status := `Name:	standalone
State:	S (sleeping)
VmRSS:	   30720 kB
RssAnon:	   12288 kB
RssFile:	   18432 kB
RssShmem:	       0 kB
Threads:	12
`
	st, err := procmem.Parse(strings.NewReader(status))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("RSS %d MiB (anonymous %d, file %d), %d threads\n", st.RSS>>20, st.Anon>>20, st.File>>20, st.Threads)
	// Output: RSS 30 MiB (anonymous 12, file 18), 12 threads
}
