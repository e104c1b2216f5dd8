// Command receiver is the demo's webhook endpoint: it listens on a free
// loopback port, writes its URL to the file named by -url-file, and prints
// each webhook it receives.
package main

import (
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
)

// maxBody bounds what the demo reads of one request.
const maxBody = 1 << 20

func main() {
	urlFile := flag.String("url-file", "", "write the receiver's URL to this file once it listens")
	flag.Parse()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	url := "http://" + ln.Addr().String() + "/hook"
	if *urlFile != "" {
		if err := os.WriteFile(*urlFile, []byte(url), 0o600); err != nil {
			log.Fatal(err)
		}
	}
	err = http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, maxBody))
		fmt.Printf("receiver: webhook %s delivered: %s\n", r.Header.Get("webhook-id"), body)
		w.WriteHeader(http.StatusNoContent)
	}))
	log.Fatal(err)
}
