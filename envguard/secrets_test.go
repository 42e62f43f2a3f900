package envguard

import (
	"context"
	"slices"
	"strings"
	"testing"
)

// A name is secret here as the decision log's default names would say.
func testSecretName(name string) bool {
	n := strings.ToLower(name)
	for _, w := range []string{"password", "secret", "token", "pwd", "sshpass"} {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}

func TestSecretsFoundInTheParsedCommand(t *testing.T) {
	tables := diffTables(t)
	for _, c := range []struct {
		cmd  string
		want []string // every value found, in any order
		keep []string // words that are no secret
	}{
		{`mysql -uroot -pS3cretPassw0rd db`, []string{"S3cretPassw0rd"}, []string{"root", "db"}},
		{`mysql -p db`, nil, []string{"db"}},
		{`mysqldump --password=Dump3rPw x`, []string{"Dump3rPw"}, nil},
		{`mariadb -pMariaPw1`, []string{"MariaPw1"}, nil},
		{`sshpass -p 'TopSecret!23' ssh host`, []string{"TopSecret!23"}, []string{"host"}},
		{`curl -u alice:Pa55wordXyz https://api`, []string{"Pa55wordXyz"}, []string{"alice"}},
		{`curl --user bob https://api`, nil, []string{"bob"}},
		{`curl --proxy-user p:Pr0xyPw -x http://proxy https://api`, []string{"Pr0xyPw"}, nil},
		{`aws configure set aws_secret_access_key wJalrXUtnFEMI`, []string{"wJalrXUtnFEMI"}, []string{"aws_secret_access_key"}},
		{`aws configure set region eu-west-1`, nil, []string{"eu-west-1"}},
		{`wget --password=WgetPw1 --http-password HttpPw2 --ftp-password=FtpPw3 https://x`, []string{"WgetPw1", "HttpPw2", "FtpPw3"}, nil},
		{`redis-cli -a RedisPw9 ping`, []string{"RedisPw9"}, []string{"ping"}},
		{`mongosh -p MongoPw7 --password=MongoPw8`, []string{"MongoPw7", "MongoPw8"}, nil},
		{`ldapsearch -x -w LdapPw5 -b dc=x`, []string{"LdapPw5"}, nil},
		{`htpasswd -bc .htpasswd alice HtPw44`, []string{"HtPw44"}, []string{"alice"}},
		{`htpasswd -c .htpasswd alice`, nil, []string{"alice"}},
		{`docker login -u me -p DockPw1 registry`, []string{"DockPw1"}, nil},
		{`docker run -p 8080:80 nginx`, nil, []string{"8080:80"}},
		{`helm repo add --username u --password HelmPw2 r https://x`, []string{"HelmPw2"}, nil},
		{`openssl rsa -in k.pem -passin pass:OsslPw3 -passout env:OUT`, []string{"OsslPw3"}, []string{"env:OUT"}},
		{`smbclient //h/s -U alice%SmbPw4`, []string{"SmbPw4"}, []string{"alice"}},
		{`PGPASSWORD=PgPw5 psql -h db`, []string{"PgPw5"}, nil},
		{`git config --global user.password GitPw6`, []string{"GitPw6"}, nil},
		{`kubectl create secret generic s --from-literal=api=KubePw7`, []string{"KubePw7"}, []string{"api"}},
		// Through wrappers, shell scripts and here-strings.
		{`env X=1 mysql -pEnvWrapped1`, []string{"EnvWrapped1"}, nil},
		{`timeout 5 sshpass -p Timeout2 ssh h`, []string{"Timeout2"}, nil},
		{`bash -c 'curl -u a:BashC3 https://x'`, []string{"BashC3"}, nil},
		{`bash <<< 'redis-cli -a HereStr4 ping'`, []string{"HereStr4"}, nil},
		{`sudo -u root mysql -pSudo5`, []string{"Sudo5"}, nil},
		{`pw=VarPw6; mysql -p"$pw" db`, []string{"VarPw6"}, nil},
		{`mysql -uroot -p"Parts7$HOME" db`, []string{"Parts7"}, []string{`"Parts7$HOME"`}},
		{`curl -u "a:$1" https://x`, nil, nil},
		{`mysql -uroot --passw=Abbrev8 db`, []string{"Abbrev8"}, nil},
		{`mysql --password="a"'Quoted9' db`, []string{"Quoted9"}, nil},
		{`rclone obscure Rclone10`, []string{"Rclone10"}, nil},
		{`ssh -p 22 host 'mysql -uroot -pRemote11 db'`, []string{"Remote11"}, []string{"22", "host"}},
		{`ssh host mysql -uroot -pRemote12 db`, []string{"Remote12"}, nil},
		{`sqlplus -s scott/Sqlplus13@db`, []string{"Sqlplus13@db"}, []string{"scott"}},
		{`xfreerdp /u:u /p:Rdp14 /v:h`, []string{"Rdp14"}, nil},
		{`mysql -uroot -p${X:-Default15} db`, []string{"Default15"}, nil},
		{`busybox ftpget -u u -p Ftp16 h f`, []string{"Ftp16"}, nil},
		{`P=VarPw7 && curl -u "a:$P" https://x`, []string{"VarPw7"}, nil},
	} {
		a, err := tables.Analyze(context.Background(), c.cmd)
		if err != nil {
			t.Errorf("%s: %v", c.cmd, err)
			continue
		}
		got := tables.Secrets(context.Background(), a, testSecretName)
		for _, w := range c.want {
			if !slices.Contains(got, w) {
				t.Errorf("%s: secrets %q lack %q", c.cmd, got, w)
			}
		}
		for _, k := range c.keep {
			if slices.Contains(got, k) {
				t.Errorf("%s: %q is no secret, got %q", c.cmd, k, got)
			}
		}
		if len(c.want) == 0 && len(got) > 0 {
			t.Errorf("%s: want no secret, got %q", c.cmd, got)
		}
	}
}

func TestSecretArgumentsValidated(t *testing.T) {
	for _, bad := range []SecretArg{
		{},
		{Option: "p"},
		{Option: "-p", OperandAfterName: true},
		{LastOperandWith: "--b"},
		{FirstOperand: true, LastOperand: true},
		{LastOperand: true, After: "/"},
		{OperandAfterName: true, After: ":"},
		{Option: "-p", Names: []string{"x"}},
	} {
		tables := &Tables{SecretArguments: map[string][]SecretArg{"prog": {bad}}}
		if err := tables.Validate(); err == nil || !strings.Contains(err.Error(), `secret_arguments["prog"][0]`) {
			t.Errorf("%+v: want an error naming the entry, got %v", bad, err)
		}
	}
}
